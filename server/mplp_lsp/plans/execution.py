"""Executing an approved plan: steps in order through the AEL, statuses through the PSG.

* The run must keep the SA profile's invariants (:mod:`mplp_lsp.plans.sa_profile`): a
  run that breaks one is refused (:class:`~mplp_lsp.graph.integrity.Rejected`, one
  issue per invariant, logged to the integration error log) before anything is written.
* The plan (and its context, if the graph lacks it) is created in the PSG, proposed and
  approved; it must reach ``approved`` to start. A plan a Confirm asks approval for is not
  approved here: it runs once the Confirm's decision approved it, and is refused before.
  Every status change goes through :class:`~mplp_lsp.graph.service.PsgService`, so
  the lifecycle checks and the ``pipeline_stage``/``graph_update`` events are the same as for
  any other client.
* Steps run one at a time in topological order; among steps that are ready together the
  lower ``order_index`` (then the plan's order) goes first. Each step is a tick: its action's
  events are flushed through the intake before the next step starts.
* A Trace records the run: one segment per step, per compensation and for the restore;
  segments are append-only, so the failure and the recovery are both kept.
* On a failed step: the step fails, steps that depend on it are ``blocked``, the others
  ``skipped``, the plan ``failed``. Then rollback: the inverses of the executed actions run in
  reverse order (compensation), and the PSG snapshot taken before the first step is restored.
* An action that raises never escapes: it is logged, written to the integration error log
  with its ValidationResult code, and recorded on the step's segment.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mplp_lsp.actions.executor import ActionError, ActionExecutionLayer
from mplp_lsp.engine.intake import Intake
from mplp_lsp.graph.integrity import Rejected, require_valid
from mplp_lsp.graph.service import PsgService
from mplp_lsp.plans import rollback
from mplp_lsp.plans.sa_profile import check_sa_run
from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.objects import ObjectKind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.sanitize.redact import redact
from mplp_lsp.store.errorlog import IntegrationErrorLog
from mplp_lsp.values import ValueStateLayer

if TYPE_CHECKING:
    from mplp_lsp.plans.run_context import RuntimeContext
    from mplp_lsp.plans.store_side import StoreSide

log = logging.getLogger(__name__)

META = {"protocol_version": "1.0.0", "schema_version": "1.0.0"}
NOOP: Mapping[str, Any] = {"type": "noop"}


@dataclass
class PlanExecution:
    """Where a plan runs: the store's PSG and intake, an AEL, and each step's action."""

    psg: PsgService
    intake: Intake
    ael: ActionExecutionLayer
    actions: Mapping[str, Any] = field(default_factory=dict)  # step_id → action; noop if absent
    error_log: IntegrationErrorLog | None = None
    settle: Callable[[], Awaitable[None]] | None = None  # wait for consumers (StoreOwner.drain)
    approve: bool = True

    @classmethod
    def from_owner(
        cls, owner: StoreSide, ael: ActionExecutionLayer, actions: Mapping[str, Any] | None = None
    ) -> PlanExecution:
        """Run plans in a store's owner (the daemon's workspace, or a CLI's direct store)."""
        return cls(owner.psg, owner.intake, ael, actions or {}, owner.error_log, owner.drain)


@dataclass
class ExecutionReport:
    plan_id: str
    trace_id: str
    plan_status: str
    order: list[str] = field(default_factory=list)  # step ids as they ran
    completed: list[str] = field(default_factory=list)
    failed_step: str | None = None
    compensated: list[str] = field(default_factory=list)  # step ids, in the order undone
    restored_changes: int = 0
    error: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def topological_order(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """Dependencies first; ties by ``order_index`` (missing: last), then position."""
    rank = {
        s["step_id"]: (s.get("order_index", float("inf")), position)
        for position, s in enumerate(steps)
    }
    waiting = {s["step_id"]: set(s.get("dependencies", ())) for s in steps}
    dependents: dict[str, list[str]] = {step_id: [] for step_id in waiting}
    for step_id, deps in waiting.items():
        for dep in deps:
            dependents[dep].append(step_id)
    ready = [(rank[s], s) for s, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _rank, step_id = heapq.heappop(ready)
        order.append(step_id)
        for child in dependents[step_id]:
            waiting[child].discard(step_id)
            if not waiting[child]:
                heapq.heappush(ready, (rank[child], child))
    return order  # the PSG refused cycles already, so every step is here


async def execute_plan(
    execution: PlanExecution,
    rc: RuntimeContext,
    vsl: ValueStateLayer,
    context: dict[str, Any] | None,
    plan: dict[str, Any],
    flush: Callable[[], Awaitable[None]],
) -> ExecutionReport:
    psg = execution.psg
    require_valid(ObjectKind.PLAN, plan)  # the same refusal as any client's, before the profile
    plan_id, context_id = plan["plan_id"], plan["context_id"]
    trace_id = new_id()
    trace = {
        "meta": META,
        "trace_id": trace_id,
        "context_id": context_id,
        "plan_id": plan_id,
        "root_span": {"trace_id": trace_id, "span_id": new_id(), "context_id": context_id},
        "status": "pending",
        "events": [_common("flow.started", {"run_id": rc.ids.run_id, "plan_id": plan_id})],
    }
    if context is None:
        context = await psg.get_context(context_id)
    profile = check_sa_run({"context": context, "plan": plan, "trace": trace})
    if not profile.ok:  # before anything is written: a refused run leaves no trace
        _refused(execution, rc, plan_id, profile)
        raise Rejected(profile)
    assert context is not None  # sa_requires_context
    if await psg.get_context(context["context_id"]) is None:
        await psg.create_context(context)
    if await psg.get_plan(plan_id) is None:
        await psg.create_plan(plan)
    stored = await psg.get_plan(plan_id)
    assert stored is not None
    awaiting = await psg.awaiting_confirms(plan_id) if stored["status"] != "approved" else []
    if awaiting:  # approval is the Confirm's decision: not taken for granted, nothing written
        named = ", ".join(f"{confirm_id} ({status})" for confirm_id, status in awaiting)
        raise Rejected(
            ValidationResult.single(
                "status",
                ErrorCode.TRANSITION_PRECONDITION,
                f"plan {plan_id} is {stored['status']}: it waits for its Confirm {named}",
            )
        )
    if execution.approve and stored["status"] == "draft":
        await psg.set_plan_status(plan_id, "proposed")
    if execution.approve and stored["status"] in ("draft", "proposed"):
        await psg.set_plan_status(plan_id, "approved")
    # Refused unless approved; before the trace, so a plan that cannot start records no run.
    await psg.set_plan_status(plan_id, "in_progress")
    await psg.create_trace(trace)
    run = _Run(execution, rc, vsl, plan_id, trace_id, flush)
    await psg.set_trace_status(trace_id, "running")
    return await run.steps(stored["steps"])


def _refused(
    execution: PlanExecution, rc: RuntimeContext, plan_id: str, result: ValidationResult
) -> None:
    log.error("plan %s refused by the SA profile: %s", plan_id, result.to_dict())
    if execution.error_log is not None:
        execution.error_log.write(
            {
                "timestamp": utc_timestamp(),
                "source_module": "runtime",
                "kind": "sa_profile",
                "plan_id": plan_id,
                "run_id": rc.ids.run_id,
                "result": result.to_dict(),
            }
        )


def _common(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    """A Trace event in the common-event shape (lowercase dotted type, a source)."""
    return {
        "event_id": new_id(),
        "event_type": event_type,
        "source": "mplp-lsp/runtime",
        "timestamp": utc_timestamp(),
        "data": data,
    }


class _Run:
    def __init__(
        self,
        execution: PlanExecution,
        rc: RuntimeContext,
        vsl: ValueStateLayer,
        plan_id: str,
        trace_id: str,
        flush: Callable[[], Awaitable[None]],
    ) -> None:
        self.x = execution
        self.rc = rc
        self.vsl = vsl
        self.plan_id = plan_id
        self.trace_id = trace_id
        self.flush = flush

    async def _segment(
        self, label: str, status: str, started: str, attributes: dict[str, Any]
    ) -> None:
        segment = {
            "segment_id": new_id(),
            "label": label[:200],
            "status": status,
            "started_at": started,
            "finished_at": utc_timestamp(),
            "attributes": attributes,
        }
        await self.x.psg.append_segments(self.trace_id, [segment])

    async def steps(self, steps: list[dict[str, Any]]) -> ExecutionReport:
        psg = self.x.psg
        report = ExecutionReport(self.plan_id, self.trace_id, "in_progress")
        if self.x.settle is not None:
            await self.x.settle()  # the snapshot must include what consumers still hold
        snapshot = await psg.read(rollback.take_snapshot)
        by_id = {s["step_id"]: s for s in steps}
        executed: list[tuple[str, dict[str, Any]]] = []
        for step_id in topological_order(steps):
            step = by_id[step_id]
            action = self.x.actions.get(step_id, NOOP)
            started = utc_timestamp()
            await psg.set_step_status(self.plan_id, step_id, "in_progress")
            report.order.append(step_id)
            try:
                result = await self._execute(action)
            except ActionError as error:
                self.rc.events.extend(error.events)
                await self._flush_after_failure()
                return await self._fail(step_id, started, error, steps, executed, snapshot, report)
            self.rc.events.extend(result.pop("events", []))
            # The action ran: from here on a failure, this step's own included, undoes it.
            executed.append((step_id, result))
            try:
                await self._flush()
            except ActionError as error:
                return await self._fail(step_id, started, error, steps, executed, snapshot, report)
            await self.vsl.set(f"runs/{self.rc.ids.run_id}/steps/{step_id}", result["output"])
            await psg.set_step_status(self.plan_id, step_id, "completed")
            await self._segment(
                f"step: {step['description']}",
                "completed",
                started,
                {"step_id": step_id, "execution_id": result.get("execution_id")},
            )
            report.completed.append(step_id)
        await psg.set_plan_status(self.plan_id, "completed")
        await psg.set_trace_status(self.trace_id, "completed")
        report.plan_status = "completed"
        return report

    async def _fail(
        self,
        step_id: str,
        started: str,
        error: ActionError,
        steps: list[dict[str, Any]],
        executed: list[tuple[str, dict[str, Any]]],
        snapshot: rollback.PsgSnapshot,
        report: ExecutionReport,
    ) -> ExecutionReport:
        """Step ``step_id`` failed: mark it and the plan failed, undo what ran, end the trace."""
        psg = self.x.psg
        by_id = {s["step_id"]: s for s in steps}
        await self._record_failure(step_id, error.result)
        await psg.set_step_status(self.plan_id, step_id, "failed")
        await self._segment(
            f"step: {by_id[step_id]['description']}",
            "failed",
            started,
            {"step_id": step_id, "code": error.code, "message": str(error)},
        )
        report.failed_step, report.error = step_id, error.result.to_dict()
        await self._settle_rest(steps, step_id)
        await psg.set_plan_status(self.plan_id, "failed")
        report.plan_status = "failed"
        await self._roll_back(executed, by_id, snapshot, report)
        await psg.set_trace_status(self.trace_id, "failed")
        return report

    async def _flush(self) -> None:
        """Hand the step's events to the intake; a failure to store them fails the step."""
        try:
            await self.flush()
        except Exception as exc:
            log.exception("plan %s: the intake could not store a step's events", self.plan_id)
            raise ActionError.single(
                ErrorCode.ACTION_FAILED,
                redact(f"the step's events were not stored: {type(exc).__name__}: {exc}"),
            ) from exc

    async def _flush_after_failure(self) -> None:
        """On the way out of a failure: events that cannot be stored do not stop the undo."""
        # Logged by _flush; the failure already being handled is the one reported.
        with contextlib.suppress(ActionError):
            await self._flush()

    async def _execute(self, action: Any) -> dict[str, Any]:
        """The AEL call; whatever it raises becomes an ActionError with a code."""
        try:
            return await self.x.ael.execute(action)
        except ActionError:
            raise
        except Exception as exc:
            log.exception("the action execution layer raised")
            raise ActionError.single(
                ErrorCode.ACTION_FAILED, redact(f"{type(exc).__name__}: {exc}")
            ) from exc

    async def _record_failure(self, step_id: str, result: ValidationResult) -> None:
        log.error("plan %s step %s failed: %s", self.plan_id, step_id, result.to_dict())
        if self.x.error_log is not None:
            self.x.error_log.write(
                {
                    "timestamp": utc_timestamp(),
                    "source_module": "runtime",
                    "kind": "action",
                    "plan_id": self.plan_id,
                    "step_id": step_id,
                    "run_id": self.rc.ids.run_id,
                    "result": result.to_dict(),
                }
            )

    async def _settle_rest(self, steps: list[dict[str, Any]], failed: str) -> None:
        """Steps that will not run: blocked right behind the failure, the others skipped.

        ``blocked`` needs a failed dependency (lifecycle), so only direct dependents are
        blocked; steps further down are skipped.
        """
        plan = await self.x.psg.get_plan(self.plan_id)
        assert plan is not None
        states = {s["step_id"]: s["status"] for s in plan["steps"]}
        for step in steps:
            step_id = step["step_id"]
            if states[step_id] != "pending":
                continue
            direct = failed in step.get("dependencies", ())
            await self.x.psg.set_step_status(
                self.plan_id, step_id, "blocked" if direct else "skipped"
            )

    async def _roll_back(
        self,
        executed: list[tuple[str, dict[str, Any]]],
        by_id: Mapping[str, Mapping[str, Any]],
        snapshot: rollback.PsgSnapshot,
        report: ExecutionReport,
    ) -> None:
        for step_id, result in reversed(executed):
            inverse = result.get("inverse")
            if inverse is None:
                continue
            started = utc_timestamp()
            label = f"compensate: {by_id[step_id]['description']}"
            try:
                done = await self._execute(inverse)
            except ActionError as error:
                self.rc.events.extend(error.events)
                await self._flush_after_failure()
                await self._record_failure(step_id, error.result)
                await self._segment(
                    label, "failed", started, {"step_id": step_id, "code": error.code}
                )
                continue  # undo what can be undone; the trace says what could not
            self.rc.events.extend(done.pop("events", []))
            await self._flush_after_failure()
            report.compensated.append(step_id)
            await self._segment(label, "completed", started, {"step_id": step_id})
        started = utc_timestamp()
        if self.x.settle is not None:
            await self.x.settle()  # consumers have applied the compensations' events
        outcome = await self.x.psg.write(lambda conn: rollback.restore_snapshot(conn, snapshot))
        report.restored_changes = int(outcome.value["changes"])
        await self._segment(
            "restore: PSG snapshot",
            "completed",
            started,
            {"snapshot_taken_at": snapshot.taken_at, "changes": report.restored_changes},
        )

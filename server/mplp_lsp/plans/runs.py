"""Running a plan in the process that owns the store: one door for the CLI, the API and LSP.

``mplp-lsp flow run`` (when no daemon runs), ``POST /psg/plans/{plan_id}/run`` and the
``mplp/plan/run`` LSP request all hand a :class:`PlanRunRequest` to :meth:`PlanRuns.run`, so a
plan runs the same way whichever way it came: through the single-agent flow
(:mod:`mplp_lsp.plans.flow`) with the SA profile's invariants, the PSG's lifecycle checks and
the chosen executor.

A request carries its documents, never a file name: the process that runs the plan reads no
file a request names (the CLI reads the user's files itself and sends their content).

The run's events are reported as they are stored: the ones the run itself submitted (its graph
changes, its actions' events), observed on the task that runs it, so what an editor saves at the
same time is not mixed in. What consumers derive from them afterwards (file nodes) is in the
event log like anything else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from mplp_lsp.engine.intake import observe_submissions
from mplp_lsp.graph.integrity import Rejected
from mplp_lsp.protocol.result import ErrorCode, ValidationResult

if TYPE_CHECKING:
    from mplp_lsp.plans.flow import ModuleInput, ModuleResult, RuntimeModule
    from mplp_lsp.plans.store_side import PlanHost
    from mplp_lsp.store.events import StoredEvent

log = logging.getLogger(__name__)

Executor = Literal["reference", "workspace"]
EXECUTORS: Final = ("reference", "workspace")
_FIELDS: Final = frozenset({"plan", "context", "actions", "executor"})


@dataclass(frozen=True)
class PlanRunRequest:
    """What to run: the plan (None: the one the graph holds), its context, each step's action."""

    plan: dict[str, Any] | None
    context: dict[str, Any] | None = None
    actions: Mapping[str, Any] = field(default_factory=dict)
    executor: Executor = "reference"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"executor": self.executor}
        if self.plan is not None:
            body["plan"] = self.plan
        if self.context is not None:
            body["context"] = self.context
        if self.actions:
            body["actions"] = dict(self.actions)
        return body


def parse_request(body: Any, plan_id: str) -> PlanRunRequest | ValidationResult:
    """A request body (``{plan?, context?, actions?, executor?}``) for the plan ``plan_id``."""
    if not isinstance(body, dict):
        return ValidationResult.single("", ErrorCode.TYPE, "the body must be a JSON object")
    extra = sorted(set(body) - _FIELDS)
    if extra:
        return ValidationResult.single(
            extra[0], ErrorCode.EXTRA_FORBIDDEN, f"{extra[0]} is not allowed here"
        )
    for name in ("plan", "context", "actions"):
        if name in body and not isinstance(body[name], dict):
            return ValidationResult.single(name, ErrorCode.TYPE, f"{name} must be a JSON object")
    executor = body.get("executor", "reference")
    if executor not in EXECUTORS:
        return ValidationResult.single(
            "executor", ErrorCode.ENUM, f"executor must be one of {', '.join(EXECUTORS)}"
        )
    plan = body.get("plan")
    if plan is not None and plan.get("plan_id") != plan_id:
        return ValidationResult.single(
            "plan.plan_id", ErrorCode.REFERENCE_UNRESOLVED, f"the plan sent is not plan {plan_id}"
        )
    return PlanRunRequest(plan, body.get("context"), body.get("actions", {}), executor)


@dataclass(frozen=True)
class PlanRunResult:
    """How a run ended: ``summary`` (``{success, execution, error}``) or ``refused``."""

    summary: dict[str, Any] | None = None
    refused: ValidationResult | None = None

    def to_json(self) -> dict[str, Any]:
        if self.summary is not None:
            return {"result": self.summary}
        assert self.refused is not None
        return {"refused": self.refused.to_dict()}


RunProgress = Sequence["StoredEvent"] | PlanRunResult


class PlanRuns:
    """Runs plans on one store's owner."""

    def __init__(self, owner: PlanHost) -> None:
        self._owner = owner
        # A run goes on when whoever asked for it goes away (a closed HTTP connection):
        # stopping half-way would leave its plan in_progress.
        self._running: set[asyncio.Task[None]] = set()

    async def stream(self, request: PlanRunRequest, plan_id: str) -> AsyncIterator[RunProgress]:
        """The run's stored events as they commit, then its :class:`PlanRunResult`."""
        queue: asyncio.Queue[RunProgress | asyncio.CancelledError] = asyncio.Queue()

        async def run() -> None:
            try:
                queue.put_nowait(await self.run(request, plan_id, stored))
            except asyncio.CancelledError as stopped:  # the daemon stops: the stream ends
                queue.put_nowait(stopped)
                raise
            except Exception:  # a bug: logged here (the reader may be gone), told in one line
                log.exception("plan run %s stopped on an internal error", plan_id)
                broken = ValidationResult.single(
                    "", ErrorCode.ACTION_FAILED, "the run stopped on an internal error (logged)"
                )
                queue.put_nowait(PlanRunResult(refused=broken))

        def stored(events: Sequence[StoredEvent]) -> None:
            if events:  # a submission that stored nothing new (a duplicate) is no progress
                queue.put_nowait(events)

        task = asyncio.create_task(run(), name=f"plan-run-{plan_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        while True:
            item = await queue.get()
            if isinstance(item, asyncio.CancelledError):
                raise item
            yield item
            if isinstance(item, PlanRunResult):
                return

    async def run(
        self,
        request: PlanRunRequest,
        plan_id: str,
        on_events: Callable[[Sequence[StoredEvent]], None],
    ) -> PlanRunResult:
        """Run the plan; ``on_events`` sees the run's stored events as they commit."""
        # Loaded when a plan runs: the AEL brings aiohttp, which an idle daemon does without.
        from mplp_lsp.actions import reference_executor, workspace_executor
        from mplp_lsp.plans.execution import PlanExecution
        from mplp_lsp.plans.flow import RunSingleAgentFlowOptions
        from mplp_lsp.plans.flow import run_single_agent_flow as run_flow
        from mplp_lsp.plans.run_context import RuntimeContext
        from mplp_lsp.values import VslError, default_url, open_vsl

        plan = request.plan or await self._owner.psg.get_plan(plan_id)
        if plan is None:
            refused = ValidationResult.single("plan_id", ErrorCode.NOT_FOUND, f"no plan {plan_id}")
            return PlanRunResult(refused=refused)
        try:
            vsl = open_vsl(self._owner.settings.vsl_url or default_url(self._owner.paths.root))
        except VslError as error:
            refused = ValidationResult.single("vsl", ErrorCode.INVALID_PARAMETER, str(error))
            return PlanRunResult(refused=refused)
        ael = (
            reference_executor()
            if request.executor == "reference"
            else workspace_executor(self._owner.root, self._owner.settings)
        )
        modules = {"plan": _given(plan)}
        if request.context is not None:
            modules["context"] = _given(request.context)
        options = RunSingleAgentFlowOptions(
            {"title": plan.get("title")},
            RuntimeContext.new(),
            modules,
            vsl,
            PlanExecution.from_owner(self._owner, ael, request.actions),
        )
        try:
            with observe_submissions(on_events):
                result = await run_flow(options)
        except Rejected as rejected:
            return PlanRunResult(refused=rejected.result)
        finally:
            await vsl.close()
        report = (result.output or {}).get("execution", {})
        summary = {"success": result.success, "execution": report, "error": result.error}
        return PlanRunResult(summary)

    async def close(self) -> None:
        """Stop runs still going, before the store closes under them.

        Like an interrupted ``flow run``: the plan stays ``in_progress`` in the graph, and
        the trace ``running``; what ran is recorded.
        """
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)


def _given(value: Any) -> RuntimeModule:
    """A runtime module that hands over a document it was given (the plan, its context)."""
    from mplp_lsp.plans.flow import ModuleResult

    async def module(_given: ModuleInput) -> ModuleResult:
        return ModuleResult(value)

    return module

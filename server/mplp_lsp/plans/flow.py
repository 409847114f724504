"""The single-agent flow (spec §2.3, §4): the module registry and the run.

:func:`run_single_agent_flow` runs the ``context`` module if registered (with an empty
context), then the ``plan`` module if registered (with a context holding a title), and
returns ``success: true`` with both results in ``output``. Each module call is a tick: the
events it returns are queued in ``runtime_context.events`` and flushed at the end of the
tick: through the intake (validated, stored, published on the bus) when the options carry a
:class:`~mplp_lsp.plans.execution.PlanExecution`, into the result otherwise.

With a ``PlanExecution``, the plan the ``plan`` module produced is then loaded into the PSG,
approved and executed (:mod:`mplp_lsp.plans.execution`), and ``success`` says whether it
completed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mplp_lsp.actions.executor import ActionError, PendingEvent
from mplp_lsp.engine.intake import Submission
from mplp_lsp.plans.execution import PlanExecution, execute_plan
from mplp_lsp.plans.run_context import RuntimeContext
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.sanitize.redact import redact
from mplp_lsp.values import ValueStateLayer

log = logging.getLogger(__name__)


@dataclass
class ModuleInput:
    ctx: dict[str, Any]
    runtime_context: RuntimeContext


@dataclass
class ModuleResult:
    output: Any = None
    events: list[PendingEvent] = field(default_factory=list)


RuntimeModule = Callable[[ModuleInput], Awaitable[ModuleResult]]
RuntimeModuleRegistry = Mapping[str, RuntimeModule]


@dataclass
class RunSingleAgentFlowOptions:
    flow: Any
    runtime_context: RuntimeContext
    modules: RuntimeModuleRegistry
    vsl: ValueStateLayer
    execution: PlanExecution | None = None


@dataclass
class RuntimeResult:
    success: bool | None = None
    output: Any = None
    error: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)


async def flush(
    runtime_context: RuntimeContext, execution: PlanExecution | None, into: list[dict[str, Any]]
) -> None:
    """End of a tick: hand the queued events on, in order, and empty the queue."""
    queued, runtime_context.events = runtime_context.events, []
    if not queued:
        return
    if execution is not None:
        await execution.intake.submit_many(
            [Submission(e.kind, e.data, e.source_module, trusted_paths=True) for e in queued]
        )
    into.extend(e.data for e in queued)


async def run_single_agent_flow(options: RunSingleAgentFlowOptions) -> RuntimeResult:
    rc, modules, execution = options.runtime_context, options.modules, options.execution
    result = RuntimeResult(output={})
    try:
        context_out = None
        if "context" in modules:
            context_out = await _tick(modules["context"], {}, rc, execution, result)
            result.output["context"] = context_out
        if "plan" in modules:
            title = _title(options.flow, context_out)
            result.output["plan"] = await _tick(
                modules["plan"], {"title": title}, rc, execution, result
            )
    except Exception as exc:  # a module's failure is the flow's result, not a crash
        failure = (
            exc.result
            if isinstance(exc, ActionError)
            else ValidationResult.single(
                "module", ErrorCode.ACTION_FAILED, redact(f"{type(exc).__name__}: {exc}")
            )
        )
        log.error("single-agent flow %s failed: %s", rc.ids.run_id, failure.to_dict())
        await flush(rc, execution, result.events)
        result.success, result.error = False, failure.to_dict()
        return result
    result.success = True
    plan = result.output.get("plan")
    if execution is not None and isinstance(plan, dict):
        report = await execute_plan(
            execution,
            rc,
            options.vsl,
            _as_dict(result.output.get("context")),
            plan,
            lambda: flush(rc, execution, result.events),
        )
        result.output["execution"] = report.to_json()
        result.success = report.plan_status == "completed"
        if not result.success:
            result.error = report.error
    await options.vsl.set(
        f"runs/{rc.ids.run_id}",
        {"success": result.success, "output": result.output, "error": result.error},
    )
    return result


async def _tick(
    module: RuntimeModule,
    ctx: dict[str, Any],
    rc: RuntimeContext,
    execution: PlanExecution | None,
    result: RuntimeResult,
) -> Any:
    out = await module(ModuleInput(ctx, rc))
    rc.events.extend(out.events)
    await flush(rc, execution, result.events)
    return out.output


def _title(flow: Any, context_out: Any) -> str:
    for source in (flow, context_out):
        if isinstance(source, dict) and isinstance(source.get("title"), str):
            return str(source["title"])
    return "single-agent flow"


def _as_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None

"""Golden-flow conformance: each upstream flow's input runs through the runtime.

Checked, per flow: the flow's output against ``expected/`` (only keys the expectation has,
arrays of equal length, generated ids and timestamps ignored, as the upstream harness does);
every object against the schemas; the global golden invariants, the flow's own and the SA
invariants (a missing path fails, unknown rules are errors); and what the upstream harness
never checked: the plan completes, steps run in dependency order, ``pipeline_stage`` and
``graph_update`` are emitted, each action is framed by ``runtime_execution`` events, and the
Trace holds an event and one segment per step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.actions import reference_executor
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.plans.execution import PlanExecution, topological_order
from mplp_lsp.plans.flow import (
    ModuleInput,
    ModuleResult,
    RunSingleAgentFlowOptions,
    run_single_agent_flow,
)
from mplp_lsp.plans.run_context import RuntimeContext
from mplp_lsp.protocol.invariants import InvariantSet
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.objects import ObjectKind, validate_object
from mplp_lsp.protocol.schemas import schema_path
from mplp_lsp.protocol.validator import default_validator
from mplp_lsp.store.events import EventLog
from mplp_lsp.values import MemoryVsl
from tests.conftest import reference_dir, require_reference

IGNORED = (
    "context_id", "plan_id", "confirm_id", "trace_id", "step_id", "span_id", "target_id",
    "role_id", "meta.created_at", "meta.updated_at", "requested_at", "started_at",
    "finished_at", "timestamp", "run_id", "correlation_id",
)  # fmt: skip

_REFERENCE = reference_dir()
# Without the data, one test that says how to get it (require_reference).
FLOWS = (
    sorted(p for p in (_REFERENCE / "tests" / "golden" / "flows").iterdir() if p.is_dir())
    if _REFERENCE is not None
    else [None]
)


def load(path: Path) -> Any:
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    if isinstance(data, dict):
        data.pop("$comment", None)
    return data


def differences(actual: Any, expected: Any, path: str = "") -> list[str]:
    if path.endswith(IGNORED) or path.startswith("root_span"):
        return []
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{path}: expected an object"]
        out: list[str] = []
        for key, value in expected.items():
            where = f"{path}.{key}" if path else key
            if key not in actual:
                if not where.endswith(IGNORED):
                    out.append(f"{where}: missing")
                continue
            out += differences(actual[key], value, where)
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {len(expected)} items"]
        return [
            d
            for n, (a, e) in enumerate(zip(actual, expected, strict=True))
            for d in differences(a, e, f"{path}[{n}]")
        ]
    return [] if actual == expected else [f"{path}: {actual!r} != {expected!r}"]


def test_the_comparison_can_fail() -> None:
    assert differences({"a": 1, "plan_id": "x"}, {"a": 2, "plan_id": "y"}) == ["a: 1 != 2"]
    assert differences({"s": [1]}, {"s": [1, 2]}) == ["s: expected 2 items"]
    assert differences({"extra": 1, "a": 1}, {"a": 1}) == []


def test_there_are_flows() -> None:
    require_reference()
    assert len(FLOWS) >= 2


def invariants(flow: Path) -> InvariantSet:
    golden = flow.parent.parent / "invariants"
    files = [*sorted(golden.glob("*.yaml")), schema_path("v2/invariants/sa-invariants.yaml")]
    if (flow / "invariants.yaml").exists():
        files.append(flow / "invariants.yaml")
    return InvariantSet.load(*files)


@pytest.mark.parametrize("flow", FLOWS, ids=[f.name if f else "no-reference-data" for f in FLOWS])
async def test_golden_flow(flow: Path | None, tmp_path: Path) -> None:
    if flow is None:
        require_reference()
        return
    context, plan = load(flow / "input" / "context.json"), load(flow / "input" / "plan.json")

    def module(value: Any) -> Any:
        async def run(_given: ModuleInput) -> ModuleResult:
            return ModuleResult(value)

        return run

    root = tmp_path / "ws"
    root.mkdir()
    ws = await Workspace.open(root, Settings(), state_dir=tmp_path / "state")
    try:
        result = await run_single_agent_flow(
            RunSingleAgentFlowOptions(
                {"title": context["title"]},
                RuntimeContext.new(),
                {"context": module(context), "plan": module(plan)},
                MemoryVsl(),
                PlanExecution.from_owner(ws.owner, reference_executor()),
            )
        )
        await ws.settle()
        events = [e.envelope for e in await ws.writer.read(lambda c: EventLog(c).query())]
        report = result.output["execution"]
        trace = await ws.psg.get_trace(report["trace_id"])
        final_plan = await ws.psg.get_plan(plan["plan_id"])
    finally:
        await ws.close()

    # the output against expected/
    for name, actual in (("context", result.output["context"]), ("plan", result.output["plan"])):
        expected = load(flow / "expected" / f"{name}.json")
        assert differences(actual, expected) == [], name
    # schemas
    assert trace is not None and final_plan is not None
    objects = {"context": result.output["context"], "plan": final_plan, "trace": trace}
    for name, obj in objects.items():
        checked = validate_object(ObjectKind(name), obj)
        assert checked.ok, (name, checked.to_dict())
    # invariants: global golden, the flow's own, SA
    rules = invariants(flow)
    for name, obj in objects.items():
        assert rules.check(name, obj, objects) == [], name
    # execution
    assert result.success is True and final_plan["status"] == "completed"
    assert {s["status"] for s in final_plan["steps"]} == {"completed"}
    order = topological_order(plan["steps"])
    assert report["order"] == order
    started = [e["stage_id"] for e in events if e["event_type"] == "step_started"]
    assert started == order
    families = {e["event_family"] for e in events}
    assert {"pipeline_stage", "graph_update", "runtime_execution"} <= families
    types = [e["event_type"] for e in events]
    assert "context_created" in types and "plan_created" in types
    runs = [e for e in events if e["event_family"] == "runtime_execution"]
    assert [r["status"] for r in runs] == ["running", "completed"] * len(order)
    validator = default_validator()
    for event in events:
        assert validator.validate(Kind(event["event_family"]), event).ok, event
    assert trace["status"] == "completed" and len(trace["events"]) >= 1
    assert [s["attributes"]["step_id"] for s in trace["segments"]] == order

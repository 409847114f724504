"""The single-agent flow, plan execution, and rollback by compensation and snapshot."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.actions import PendingEvent, reference_executor, workspace_executor
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.plans import rollback
from mplp_lsp.plans.execution import PlanExecution, topological_order
from mplp_lsp.plans.flow import (
    ModuleInput,
    ModuleResult,
    RunSingleAgentFlowOptions,
    run_single_agent_flow,
)
from mplp_lsp.plans.run_context import RuntimeContext
from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.kinds import EVENT_FAMILY_KINDS, Kind
from mplp_lsp.protocol.validator import default_validator
from mplp_lsp.store.events import EventLog, StoredEvent
from mplp_lsp.values import MemoryVsl
from tests.support.plans import context_doc

META = {"protocol_version": "1.0.0", "schema_version": "1.0.0"}


@pytest.fixture
async def workspace(tmp_path: Path) -> AsyncIterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    ws = await Workspace.open(root, Settings(), state_dir=tmp_path / "state")
    yield ws
    await ws.close()


def step(description: str, deps: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "step_id": new_id(),
        "description": description,
        "status": "pending",
        "dependencies": deps or [],
        **extra,
    }


def plan_of(context_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "meta": META,
        "plan_id": new_id(),
        "context_id": context_id,
        "title": "Release",
        "objective": "Ship it",
        "status": "draft",
        "steps": steps,
    }


def loader(name: str, value: Any) -> Any:
    async def module(_input: ModuleInput) -> ModuleResult:
        return ModuleResult(output=value)

    module.__name__ = name
    return module


async def stored(ws: Workspace) -> list[StoredEvent]:
    await ws.settle()
    return await ws.writer.read(lambda conn: EventLog(conn).query())


async def run(
    ws: Workspace, context: dict[str, Any], plan: dict[str, Any], ael: Any, actions: Any
) -> Any:
    options = RunSingleAgentFlowOptions(
        flow={"title": plan["title"]},
        runtime_context=RuntimeContext.new(),
        modules={"context": loader("context", context), "plan": loader("plan", plan)},
        vsl=MemoryVsl(),
        execution=PlanExecution.from_owner(ws.owner, ael, actions),
    )
    return await run_single_agent_flow(options)


async def test_the_minimal_flow_runs_context_then_plan(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def module(name: str) -> Any:
        async def run_module(given: ModuleInput) -> ModuleResult:
            seen.append((name, given.ctx))
            given.runtime_context.coordination.metadata[name] = True
            event = {"event_id": new_id(), "event_family": "intent", "event_type": name}
            return ModuleResult({"from": name}, [PendingEvent(Kind.ENVELOPE, event, name)])

        return run_module

    rc = RuntimeContext.new()
    vsl = MemoryVsl()
    result = await run_single_agent_flow(
        RunSingleAgentFlowOptions(
            {"title": "Demo"}, rc, {"plan": module("plan"), "context": module("context")}, vsl
        )
    )
    assert result.success is True
    assert result.output == {"context": {"from": "context"}, "plan": {"from": "plan"}}
    assert seen == [("context", {}), ("plan", {"title": "Demo"})]
    assert [e["event_type"] for e in result.events] == ["context", "plan"]
    assert rc.events == []  # flushed at the end of each tick
    assert rc.coordination.ids.run_id == rc.ids.run_id
    assert (await vsl.get(f"runs/{rc.ids.run_id}"))["success"] is True


async def test_a_module_that_raises_is_a_failed_result(tmp_path: Path) -> None:
    async def broken(_given: ModuleInput) -> ModuleResult:
        raise RuntimeError("no plan today")

    result = await run_single_agent_flow(
        RunSingleAgentFlowOptions(None, RuntimeContext.new(), {"plan": broken}, MemoryVsl())
    )
    assert result.success is False
    assert result.error["errors"][0]["code"] == "action_failed"


@given(st.data())
def test_topological_order_respects_dependencies_and_order_index(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 8))
    ids = [f"s{i}" for i in range(count)]
    steps = []
    for i, step_id in enumerate(ids):
        deps = data.draw(st.lists(st.sampled_from(ids[:i]), unique=True)) if i else []
        entry: dict[str, Any] = {"step_id": step_id, "dependencies": deps}
        if data.draw(st.booleans()):
            entry["order_index"] = data.draw(st.integers(0, 3))
        steps.append(entry)
    shuffled = data.draw(st.permutations(steps))
    order = topological_order(shuffled)
    assert sorted(order) == sorted(ids)
    where = {s: n for n, s in enumerate(order)}
    for entry in steps:
        assert all(where[d] < where[entry["step_id"]] for d in entry["dependencies"])


def test_order_index_breaks_ties_then_plan_order() -> None:
    steps: list[dict[str, Any]] = [
        {"step_id": "late", "order_index": 5},
        {"step_id": "none"},
        {"step_id": "early", "order_index": 1},
        {"step_id": "after-early", "order_index": 0, "dependencies": ["early"]},
    ]
    assert topological_order(steps) == ["early", "after-early", "late", "none"]


async def test_an_approved_plan_runs_in_order_and_completes(workspace: Workspace) -> None:
    context = context_doc()
    first, second = step("first", order_index=2), step("second", order_index=1)
    third = step("third", [first["step_id"]], order_index=0)
    plan = plan_of(context["context_id"], [first, second, third])
    result = await run(workspace, context, plan, reference_executor(), {})
    assert result.success is True, result.error
    report = result.output["execution"]
    assert report["order"] == [second["step_id"], first["step_id"], third["step_id"]]
    events = await stored(workspace)
    started = [e.envelope["stage_id"] for e in events if e.envelope["event_type"] == "step_started"]
    assert started == report["order"]
    plan_moves = [
        e.envelope["payload"]["to"]
        for e in events
        if e.envelope["event_type"] == "plan_status_changed"
    ]
    assert plan_moves == ["proposed", "approved", "in_progress", "completed"]
    trace = await workspace.psg.get_trace(report["trace_id"])
    assert trace is not None and trace["status"] == "completed"
    assert [s["status"] for s in trace["segments"]] == ["completed"] * 3


async def test_a_third_step_whose_tool_fails_rolls_back(workspace: Workspace) -> None:
    root = workspace.root
    (root / "a.txt").write_text("original\n")
    await workspace.intake.submit(
        Submission(
            Kind.FILE_UPDATE,
            {"file_path": "a.txt", "change_type": "created", "timestamp": utc_timestamp()},
            "test",
        )
    )
    await workspace.settle()
    before = await workspace.psg.read(rollback.take_snapshot)
    assert "a.txt" in before.files
    context = context_doc()
    s1, s2 = step("edit a"), step("add b")
    s2["dependencies"] = [s1["step_id"]]
    s3 = step("run the tests", [s2["step_id"]])
    s4 = step("publish", [s3["step_id"]])
    plan = plan_of(context["context_id"], [s1, s2, s3, s4])
    actions = {
        s1["step_id"]: {"type": "file", "op": "write", "path": "a.txt", "content": "changed\n"},
        s2["step_id"]: {"type": "file", "op": "write", "path": "b.txt", "content": "new\n"},
        s3["step_id"]: {
            "type": "tool",
            "argv": [sys.executable, "-c", "import sys; print('2 failed'); sys.exit(3)"],
            "tool_kind": "test_runner",
        },
    }
    result = await run(workspace, context, plan, workspace_executor(root), actions)
    assert result.success is False
    assert result.error["errors"][0]["code"] == "tool_failed"
    report = result.output["execution"]
    assert report["completed"] == [s1["step_id"], s2["step_id"]]
    assert report["failed_step"] == s3["step_id"]
    assert report["compensated"] == [s2["step_id"], s1["step_id"]]  # reverse order
    # the files are back
    assert (root / "a.txt").read_text() == "original\n"
    assert not (root / "b.txt").exists()
    # statuses are history: 1-2 completed, 3 failed, 4 blocked behind it, plan failed
    stored_plan = await workspace.psg.get_plan(plan["plan_id"])
    assert stored_plan is not None and stored_plan["status"] == "failed"
    assert [s["status"] for s in stored_plan["steps"]] == [
        "completed",
        "completed",
        "failed",
        "blocked",
    ]
    # the PSG snapshot is restored, and the restore was announced
    after = await workspace.psg.read(rollback.take_snapshot)
    assert after.files == before.files
    events = await stored(workspace)
    [restore] = [e for e in events if e.envelope["event_type"] == "psg_snapshot_restored"]
    assert restore.envelope["event_family"] == "graph_update"
    assert restore.envelope["payload"]["changes"]
    # the trace shows the failure and the recovery
    trace = await workspace.psg.get_trace(report["trace_id"])
    assert trace is not None and trace["status"] == "failed"
    assert [(s["label"], s["status"]) for s in trace["segments"]] == [
        ("step: edit a", "completed"),
        ("step: add b", "completed"),
        ("step: run the tests", "failed"),
        ("compensate: add b", "completed"),
        ("compensate: edit a", "completed"),
        ("restore: PSG snapshot", "completed"),
    ]
    assert trace["segments"][2]["attributes"]["code"] == "tool_failed"
    # the tool and file evidence, and every event schema-valid
    tools = [e.envelope["payload"] for e in events if e.kind == "tool"]
    assert [(t["status"], t.get("exit_code")) for t in tools] == [("running", None), ("failed", 3)]
    assert "2 failed" in tools[1]["output_summary"]
    files = [
        (e.envelope["payload"]["file_path"], e.envelope["payload"]["change_type"])
        for e in events
        if e.kind == "file_update"
    ]
    assert files == [
        ("a.txt", "created"),
        ("a.txt", "modified"),
        ("b.txt", "created"),
        ("b.txt", "deleted"),
        ("a.txt", "modified"),
    ]
    runs = [e.envelope for e in events if e.kind == "runtime_execution"]
    assert [r["status"] for r in runs] == ["running", "completed"] * 2 + [
        "running",
        "failed",
    ] + ["running", "completed"] * 2
    validator = default_validator()
    for event in events:
        family = Kind(event.kind)
        kind = family if family in EVENT_FAMILY_KINDS else Kind.ENVELOPE
        assert validator.validate(kind, event.envelope).ok, event.envelope
    assert workspace.intake.counters.rejected == 0
    log = workspace.error_log.read()
    assert any(r.get("result", {}).get("errors", [{}])[0].get("code") == "tool_failed" for r in log)


async def test_an_action_that_raises_does_not_take_the_daemon_down(
    workspace: Workspace,
) -> None:
    class Exploding:
        async def execute(self, action: Any) -> dict[str, Any]:
            raise ZeroDivisionError("the executor is broken")

    context = context_doc()
    only = step("explode")
    plan = plan_of(context["context_id"], [only])
    result = await run(workspace, context, plan, Exploding(), {})
    assert result.success is False
    assert result.error["errors"][0]["code"] == "action_failed"
    log = workspace.error_log.read()
    [record] = [r for r in log if r.get("kind") == "action"]
    assert record["result"]["errors"][0]["code"] == "action_failed"
    assert record["step_id"] == only["step_id"]
    # the daemon goes on: another flow runs, events are still accepted
    again = plan_of(context["context_id"], [step("fine")])
    assert (await run(workspace, context, again, reference_executor(), {})).success is True


async def test_an_invalid_action_fails_its_step_with_the_schema_code(workspace: Workspace) -> None:
    context = context_doc()
    only = step("bad action")
    plan = plan_of(context["context_id"], [only])
    actions = {only["step_id"]: {"type": "tool", "argv": []}}
    result = await run(workspace, context, plan, workspace_executor(workspace.root), actions)
    assert result.success is False
    assert result.error["errors"][0] == {
        "path": "argv",
        "code": "min_items",
        "message": result.error["errors"][0]["message"],
    }


async def test_an_unapproved_plan_does_not_start(workspace: Workspace) -> None:
    from mplp_lsp.graph.integrity import Rejected

    context = context_doc()
    plan = plan_of(context["context_id"], [step("x")])
    options = RunSingleAgentFlowOptions(
        None,
        RuntimeContext.new(),
        {"context": loader("c", context), "plan": loader("p", plan)},
        MemoryVsl(),
        PlanExecution(workspace.psg, workspace.intake, reference_executor(), approve=False),
    )
    with pytest.raises(Rejected) as refused:
        await run_single_agent_flow(options)
    assert refused.value.result.codes == ["transition_forbidden"]


async def test_a_step_whose_events_cannot_be_stored_fails_and_rolls_back(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace.root
    (root / "a.txt").write_text("original\n")
    submit_many = workspace.intake.submit_many

    async def failing(submissions: Any) -> Any:
        if any(s.kind is Kind.FILE_UPDATE for s in submissions):
            raise sqlite3.OperationalError("disk I/O error")
        return await submit_many(submissions)

    monkeypatch.setattr(workspace.intake, "submit_many", failing)
    context = context_doc()
    only = step("edit a")
    plan = plan_of(context["context_id"], [only])
    actions = {only["step_id"]: {"type": "file", "op": "write", "path": "a.txt", "content": "x\n"}}
    result = await run(workspace, context, plan, workspace_executor(root), actions)
    assert result.success is False
    assert result.error["errors"][0]["code"] == "action_failed"
    assert "not stored" in result.error["errors"][0]["message"]
    report = result.output["execution"]
    assert report["failed_step"] == only["step_id"] and report["compensated"] == [only["step_id"]]
    assert (root / "a.txt").read_text() == "original\n"  # the written file is rolled back
    stored_plan = await workspace.psg.get_plan(plan["plan_id"])
    assert stored_plan is not None and stored_plan["status"] == "failed"
    assert [s["status"] for s in stored_plan["steps"]] == ["failed"]
    trace = await workspace.psg.get_trace(report["trace_id"])
    assert trace is not None and trace["status"] == "failed"

"""The SA profile's invariants when a single-agent flow runs: each one, with its own code."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.graph.inspection import dump
from mplp_lsp.plans.runs import PlanRunRequest, PlanRuns
from mplp_lsp.plans.sa_profile import check_sa_run, sa_invariants
from mplp_lsp.protocol.envelope import new_id
from mplp_lsp.store.events import StoredEvent
from tests.support.plans import context_doc, plan_doc

Objects = dict[str, Any]


def run_objects() -> Objects:
    context = context_doc()
    plan = plan_doc(context["context_id"])
    trace = {
        "trace_id": new_id(),
        "context_id": context["context_id"],
        "plan_id": plan["plan_id"],
        "events": [{"event_type": "flow.started"}],
    }
    return {"context": context, "plan": plan, "trace": trace}


def _set(scope: str, path: str, value: Any) -> Callable[[Objects], None]:
    def breaks(objects: Objects) -> None:
        target = objects[scope]
        *parents, last = path.split(".")
        for name in parents:
            target = target[int(name)] if name.isdigit() else target[name]
        target[last] = value

    return breaks


# One way to break each invariant of sa-invariants.yaml (and only that one).
BREAKS: dict[str, Callable[[Objects], None]] = {
    "sa_requires_context": _set("context", "context_id", "not-a-uuid"),
    "sa_context_must_be_active": _set("context", "status", "suspended"),
    "sa_plan_context_binding": _set("plan", "context_id", new_id()),
    "sa_plan_has_steps": _set("plan", "steps", []),
    "sa_steps_have_valid_ids": _set("plan", "steps.1.step_id", "STEP-2"),
    "sa_steps_agent_role_if_present": _set("plan", "steps.0.agent_role", ""),
    "sa_trace_not_empty": _set("trace", "events", []),
    "sa_trace_context_binding": _set("trace", "context_id", new_id()),
    "sa_trace_plan_binding": _set("trace", "plan_id", new_id()),
}


def test_every_invariant_of_the_profile_has_a_case() -> None:
    assert {invariant.id for invariant in sa_invariants().invariants} == set(BREAKS)


def test_a_run_that_keeps_the_profile_passes() -> None:
    assert check_sa_run(run_objects()).ok
    absent_role = run_objects()  # agent_role is checked only when present
    assert "agent_role" not in absent_role["plan"]["steps"][0]
    assert check_sa_run(absent_role).ok


@pytest.mark.parametrize("invariant", sorted(BREAKS))
def test_each_broken_invariant_is_refused_with_its_id_as_the_code(invariant: str) -> None:
    objects = run_objects()
    if invariant == "sa_requires_context":
        objects["trace"]["context_id"] = objects["plan"]["context_id"] = "not-a-uuid"
    BREAKS[invariant](objects)
    result = check_sa_run(objects)
    assert not result.ok
    assert set(result.codes) == {invariant}, result.to_dict()
    assert all(invariant in issue.message for issue in result.errors)


def test_a_run_without_a_context_breaks_sa_requires_context() -> None:
    objects = run_objects()
    objects["context"] = None
    assert "sa_requires_context" in check_sa_run(objects).codes


@pytest.fixture
async def workspace(tmp_path: Path) -> AsyncIterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    ws = await Workspace.open(root, Settings(), state_dir=tmp_path / "state")
    yield ws
    await ws.close()


async def test_a_refused_run_writes_nothing_and_is_logged(workspace: Workspace) -> None:
    objects = run_objects()
    objects["context"]["status"] = "archived"
    before = await workspace.writer.read(dump)
    seen: list[StoredEvent] = []
    runs = PlanRuns(workspace.owner)
    request = PlanRunRequest(objects["plan"], objects["context"])
    result = await runs.run(request, objects["plan"]["plan_id"], seen.extend)
    assert result.summary is None and result.refused is not None
    assert result.refused.codes == ["sa_context_must_be_active"]
    assert seen == [] and await workspace.writer.read(dump) == before
    logged = [json.loads(line) for line in workspace.paths.error_log.read_text().splitlines()]
    [entry] = [e for e in logged if e.get("kind") == "sa_profile"]
    assert entry["plan_id"] == objects["plan"]["plan_id"]
    assert entry["result"]["errors"][0]["code"] == "sa_context_must_be_active"


async def test_the_trace_a_run_records_keeps_the_trace_invariants(workspace: Workspace) -> None:
    objects = run_objects()
    seen: list[StoredEvent] = []
    request = PlanRunRequest(objects["plan"], objects["context"])
    result = await PlanRuns(workspace.owner).run(request, objects["plan"]["plan_id"], seen.extend)
    assert result.summary is not None and result.summary["success"], result.to_json()
    trace = await workspace.psg.get_trace(result.summary["execution"]["trace_id"])
    assert trace is not None
    assert check_sa_run({**objects, "trace": trace}).ok
    assert len({event.seq for event in seen}) == len(seen) > 0

"""The lifecycle tables, cycle naming, the outbox and cascades of the PSG core."""

from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path

import pytest

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.graph import contexts, pending, plans
from mplp_lsp.graph.integrity import Rejected
from mplp_lsp.plans import transitions as lifecycle
from mplp_lsp.protocol.envelope import new_id
from mplp_lsp.store.events import EventLog
from tests.support.plans import context_doc, plan_doc

PLAN_TABLE = {
    "draft": {"proposed", "cancelled"},
    "proposed": {"approved", "draft"},
    "approved": {"in_progress"},
    "in_progress": {"completed", "failed", "cancelled"},
}
STEP_TABLE = {
    "pending": {"in_progress", "blocked", "skipped"},
    "in_progress": {"completed", "failed"},
    "blocked": {"pending"},
}


@pytest.mark.parametrize(
    ("kind", "states", "table", "final"),
    [
        ("plan", lifecycle.PLAN_STATES, PLAN_TABLE, {"completed", "failed", "cancelled"}),
        ("step", lifecycle.STEP_STATES, STEP_TABLE, {"completed", "failed", "skipped"}),
    ],
)
def test_the_tables_are_the_adopted_ones(
    kind: lifecycle.ObjectType,
    states: tuple[str, ...],
    table: dict[str, set[str]],
    final: set[str],
) -> None:
    for old, new in itertools.product(states, states):
        result = lifecycle.check_table(kind, old, new)
        if new in table.get(old, set()):
            assert result.ok, (old, new)
            continue
        [error] = result.errors
        expected = "transition_from_terminal" if old in final else "transition_forbidden"
        assert error.code == expected, (old, new)
        assert f"{kind} {old} → {new}" in error.message


def test_unknown_states_are_enum_errors() -> None:
    assert lifecycle.check_table("plan", "draft", "running").codes == ["enum"]
    assert lifecycle.check_table("step", "done", "pending").codes == ["enum"]


def test_a_cycle_is_named_in_order() -> None:
    assert plans.find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) in (
        ["a", "b", "c", "a"],
        ["b", "c", "a", "b"],
        ["c", "a", "b", "c"],
    )
    assert plans.find_cycle({"a": ["a"]}) == ["a", "a"]
    assert plans.find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) == []


async def _open(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    return await Workspace.open(root, Settings(), state_dir=tmp_path / "state")


async def test_events_left_in_the_outbox_are_stored_at_the_next_start(tmp_path: Path) -> None:
    workspace = await _open(tmp_path)
    context = context_doc()
    # The write commits, then the process dies before the intake saw its events.
    outcome = await workspace.writer.run(lambda conn: contexts.create_context(conn, context))
    await workspace.close()

    workspace = await _open(tmp_path)
    try:
        stored = await workspace.writer.read(lambda c: EventLog(c).query(kinds=["graph_update"]))
        assert [e.event_id for e in stored] == [outcome.events[0]["event_id"]]
        # The next write clears what was handed over, in its own transaction.
        second = await workspace.psg.create_context(context_doc())
        left = await workspace.writer.read(pending.pending_events)
    finally:
        await workspace.close()
    assert [e["event_id"] for e in left] == [second.events[0]["event_id"]]


async def test_failing_a_plan_fails_its_running_steps(tmp_path: Path) -> None:
    workspace = await _open(tmp_path)
    try:
        context = context_doc()
        await workspace.psg.create_context(context)
        plan = plan_doc(context["context_id"])
        plan_id, first = plan["plan_id"], plan["steps"][0]["step_id"]
        await workspace.psg.create_plan(plan)
        for status in ("proposed", "approved", "in_progress"):
            await workspace.psg.set_plan_status(plan_id, status)
        await workspace.psg.set_step_status(plan_id, first, "in_progress")
        outcome = await workspace.psg.set_plan_status(plan_id, "cancelled")
    finally:
        await workspace.close()
    assert [s["status"] for s in outcome.value["steps"]] == ["failed", "pending"]
    assert [(e["stage_id"], e["stage_status"]) for e in outcome.events] == [
        (plan_id, "failed"),
        (first, "failed"),
    ]
    assert outcome.events[1]["payload"]["reason"] == "plan cancelled"


async def test_a_confirm_must_target_a_node(tmp_path: Path) -> None:
    workspace = await _open(tmp_path)
    try:
        context = context_doc()
        await workspace.psg.create_context(context)
        confirm = {
            "meta": context["meta"],
            "confirm_id": new_id(),
            "target_type": "context",
            "target_id": context["context_id"],
            "status": "pending",
            "requested_by_role": "reviewer",
            "requested_at": "2026-01-01T00:00:00Z",
        }
        created = await workspace.psg.create_confirm(confirm)
        assert created.events[0]["update_kind"] == "bulk"  # node + edge
        with pytest.raises(Rejected) as refused:
            await workspace.psg.create_confirm(
                confirm | {"confirm_id": new_id(), "target_id": new_id()}
            )
        assert refused.value.result.codes == ["reference_unresolved"]
        assert await workspace.psg.get_confirm(confirm["confirm_id"]) == confirm
    finally:
        await workspace.close()


_ANNOTATIONS = {"$comment", "$id", "$schema", "title", "description", "examples", "x-mplp-meta"}
_UPSTREAM_ONLY_DEFS = {
    "context_core_properties",
    "plan_core_properties",
    "confirm_core_properties",
    "trace_core_properties",
    "uuid",
}
MODULE_SCHEMAS = [
    "mplp-context.schema.json",
    "mplp-plan.schema.json",
    "mplp-confirm.schema.json",
    "mplp-trace.schema.json",
    "common/identifiers.schema.json",
    "common/metadata.schema.json",
    "common/common-types.schema.json",
    "common/trace-base.schema.json",
    "common/events.schema.json",
]


def _structure(node: object, in_properties: bool = False) -> object:
    """A schema without its annotations (property names are kept, whatever they are)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if not in_properties and key in _ANNOTATIONS:
                continue
            if key == "$defs" and not in_properties:
                value = {k: v for k, v in value.items() if k not in _UPSTREAM_ONLY_DEFS}
                if not value:
                    continue
            nested = key in ("properties", "definitions", "$defs") and not in_properties
            out[key] = _structure(value, nested)
        return out
    if isinstance(node, list):
        return [_structure(item) for item in node]
    return node


@pytest.mark.parametrize("name", MODULE_SCHEMAS)
def test_our_module_schemas_equal_upstream_in_structure(reference: Path, name: str) -> None:
    import json

    from mplp_lsp.protocol.schemas import load_json

    upstream = json.loads((reference / "schemas" / "v2" / name).read_text(encoding="utf-8"))
    assert _structure(load_json(f"v2/{name}")) == _structure(upstream)


def test_the_upstream_examples_validate(reference: Path) -> None:
    import json

    from mplp_lsp.protocol.objects import ObjectKind, validate_object

    for path in sorted((reference / "schemas" / "v2" / "examples").glob("*.json")):
        kind = path.name.split(".")[0]
        if kind == "event":
            continue
        example = json.loads(path.read_text(encoding="utf-8"))
        example.pop("$comment", None)  # upstream examples carry one their schemas reject
        assert validate_object(ObjectKind(kind), example).ok, path.name


async def test_the_editors_status_is_read_without_waiting_for_the_read_thread(
    tmp_path: Path,
) -> None:
    # The editor's status item asks during a burst; a read on the graph's thread waited for
    # the GIL at each of its queries. Here that thread is held: the status still answers,
    # and it counts what is stored. The retention report (for `mplp-lsp status`) stays there.
    workspace = await _open(tmp_path)
    held, release = threading.Event(), threading.Event()

    def hold(_conn: object) -> None:
        held.set()
        release.wait(30)

    try:
        await workspace.psg.create_context(context_doc())
        holding = asyncio.ensure_future(workspace.psg.read(hold))
        await asyncio.to_thread(held.wait, 30)
        status = await asyncio.wait_for(workspace.status(), 10)
        with_retention = asyncio.ensure_future(workspace.status(retention=True))
        await asyncio.sleep(0.05)
        waited = not with_retention.done()
        release.set()
        await holding
        assert (await with_retention).retention is not None
    finally:
        release.set()
        await workspace.close()
    assert status.events_by_kind == {"graph_update": 1}
    assert waited

"""Random sequences of graph edits and status changes keep every PSG invariant.

The machine drives the real graph code on a real SQLite store, one transaction per write as
the daemon runs it. After every step the invariants hold; every refused write leaves the
PSG tables byte for byte as they were; every accepted status change produced exactly one
pipeline_stage and every structural write exactly one graph_update.
"""

from __future__ import annotations

import graphlib
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mplp_lsp.graph import contexts, pending, plans, steps, traces
from mplp_lsp.graph.changes import WriteResult
from mplp_lsp.graph.inspection import dump
from mplp_lsp.graph.integrity import ID_TABLES, Rejected
from mplp_lsp.plans import transitions as lifecycle
from mplp_lsp.protocol.envelope import new_id
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from mplp_lsp.store.database import connect, transaction
from tests.support.properties import examples

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
META = {"protocol_version": "1.0.0", "schema_version": "1.0.0"}
PLAN_MOVES = [*lifecycle.PLAN_STATES, "running", ""]
STEP_MOVES = [*lifecycle.STEP_STATES, "done"]
STRUCTURAL = {"create_context", "create_plan", "create_trace", "append_segments"}
WRITES = {
    write.__name__: write
    for write in (
        contexts.create_context,
        plans.create_plan,
        plans.set_plan_status,
        steps.set_step_status,
        traces.create_trace,
        traces.append_segments,
        traces.refuse_segment_edit,
    )
}
# The adopted lifecycle tables, written out again here so the test does not trust the code's.
ALLOWED = {
    ("draft", "proposed"),
    ("draft", "cancelled"),
    ("proposed", "approved"),
    ("proposed", "draft"),
    ("approved", "in_progress"),
    ("in_progress", "completed"),
    ("in_progress", "failed"),
    ("in_progress", "cancelled"),
    ("pending", "in_progress"),
    ("pending", "blocked"),
    ("pending", "skipped"),
    ("in_progress", "failed"),
    ("blocked", "pending"),
}


class PsgMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="psg-"))
        self.conn: sqlite3.Connection = connect(self.dir / "events.db")
        self.contexts: list[str] = []
        self.plans: dict[str, list[str]] = {}
        self.traces: dict[str, list[str]] = {}
        self.segments: dict[str, str] = {}  # segment id → body as first stored
        self.refused = 0
        self.moves: set[tuple[str, str]] = set()

    def teardown(self) -> None:
        self.conn.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- running one write the way the daemon does ---------------------------------------

    def statuses(self) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT plan_id, status FROM psg_plans UNION ALL SELECT step_id, status FROM psg_steps"
        )
        return dict(rows.fetchall())

    def write(self, name: str, *args: Any) -> WriteResult | None:
        before, statuses = dump(self.conn), self.statuses()
        try:
            with transaction(self.conn):
                outcome: WriteResult = WRITES[name](self.conn, *args)
        except Rejected as rejected:
            assert not rejected.result.ok and rejected.result.errors
            assert dump(self.conn) == before, f"{name} was refused but changed the graph"
            self.refused += 1
            return None
        after = self.statuses()
        moves = {
            (statuses[key], value)
            for key, value in after.items()
            if statuses.get(key, value) != value
        }
        changed = sum(1 for key, value in after.items() if statuses.get(key, value) != value)
        assert moves <= ALLOWED, moves - ALLOWED
        self.moves |= moves
        families = [event["event_family"] for event in outcome.events]
        assert families.count("pipeline_stage") == changed
        assert families.count("graph_update") == (1 if name in STRUCTURAL else 0)
        for event in outcome.events:
            assert validate(Kind(event["event_family"]), event).ok, event
        # The events are recorded in the write's own transaction (pending graph events).
        stored = {event["event_id"] for event in pending.pending_events(self.conn)}
        assert {event["event_id"] for event in outcome.events} <= stored
        return outcome

    # --- graph edits ---------------------------------------------------------------------

    @rule(missing=st.booleans())
    def add_context(self, missing: bool) -> None:
        context_id = new_id()
        context = {
            "meta": META,
            "context_id": context_id if not missing else context_id.upper(),
            "root": {"domain": "d", "environment": "e"},
            "title": "c",
            "status": "active",
        }
        if self.write("create_context", context):
            self.contexts.append(context_id)

    @rule(
        data=st.data(),
        size=st.integers(1, 5),
        dangling_context=st.booleans(),
        initial=st.sampled_from(["draft", "draft", "draft", "approved"]),
    )
    def add_plan(
        self, data: st.DataObject, size: int, dangling_context: bool, initial: str
    ) -> None:
        context_id = (
            new_id()
            if dangling_context or not self.contexts
            else data.draw(st.sampled_from(self.contexts))
        )
        ids = [new_id() for _ in range(size)]
        outside = new_id()
        steps = []
        for index, step_id in enumerate(ids):
            # mostly backwards edges (a DAG), sometimes forwards (maybe a cycle) or outside
            odd = [step_id, ids[-1], outside] if data.draw(st.integers(0, 3)) == 0 else []
            choices = ids[:index] + odd
            deps = data.draw(st.lists(st.sampled_from(choices), max_size=3)) if choices else []
            step: dict[str, Any] = {"step_id": step_id, "description": "s", "status": "pending"}
            if deps:
                step["dependencies"] = deps
            steps.append(step)
        plan: dict[str, Any] = {
            "meta": META,
            "plan_id": new_id(),
            "context_id": context_id,
            "title": "p",
            "objective": "o",
            "status": initial,
            "steps": steps,
        }
        if self.write("create_plan", plan):
            self.plans[plan["plan_id"]] = ids

    @rule(missing_plan=st.booleans(), data=st.data())
    def add_trace(self, missing_plan: bool, data: st.DataObject) -> None:
        if not self.contexts:
            return
        trace_id = new_id()
        trace: dict[str, Any] = {
            "meta": META,
            "trace_id": trace_id,
            "context_id": data.draw(st.sampled_from(self.contexts)),
            "root_span": {"trace_id": trace_id, "span_id": new_id()},
            "status": "running",
        }
        if missing_plan:
            trace["plan_id"] = new_id()
        if self.write("create_trace", trace):
            self.traces[trace_id] = []

    @precondition(lambda self: self.traces)
    @rule(data=st.data(), parent=st.sampled_from(["none", "own", "foreign", "reuse"]))
    def append_segment(self, data: st.DataObject, parent: str) -> None:
        trace_id = data.draw(st.sampled_from(list(self.traces)))
        segment: dict[str, Any] = {"segment_id": new_id(), "label": "x", "status": "completed"}
        own = self.traces[trace_id]
        if parent == "own" and own:
            segment["parent_segment_id"] = data.draw(st.sampled_from(own))
        elif parent == "foreign":
            segment["parent_segment_id"] = new_id()
        elif parent == "reuse" and self.segments:
            segment["segment_id"] = data.draw(st.sampled_from(list(self.segments)))
        if self.write("append_segments", trace_id, [segment]):
            own.append(segment["segment_id"])
            stored = self.conn.execute(
                "SELECT body FROM psg_trace_segments WHERE segment_id = ?",
                (segment["segment_id"],),
            ).fetchone()[0]
            self.segments[segment["segment_id"]] = stored

    @precondition(lambda self: self.segments)
    @rule(data=st.data())
    def edit_segment(self, data: st.DataObject) -> None:
        segment_id = data.draw(st.sampled_from(list(self.segments)))
        trace_id = next(t for t, ids in self.traces.items() if segment_id in ids)
        assert self.write("refuse_segment_edit", trace_id, segment_id) is None

    # --- status changes ------------------------------------------------------------------

    @precondition(lambda self: self.plans)
    @rule(data=st.data(), status=st.sampled_from(PLAN_MOVES))
    def move_plan(self, data: st.DataObject, status: str) -> None:
        self.write("set_plan_status", data.draw(st.sampled_from(list(self.plans))), status)

    @precondition(lambda self: self.plans)
    @rule(data=st.data(), status=st.sampled_from(STEP_MOVES))
    def move_step(self, data: st.DataObject, status: str) -> None:
        plan_id = data.draw(st.sampled_from(list(self.plans)))
        step_id = data.draw(st.sampled_from(self.plans[plan_id]))
        self.write("set_step_status", plan_id, step_id, status)

    @precondition(lambda self: self.plans)
    @rule(data=st.data())
    def drive_a_plan_forward(self, data: st.DataObject) -> None:
        """Random moves rarely get far; this walks a plan along its happy path."""
        plan_id = data.draw(st.sampled_from(list(self.plans)))
        for status in ("proposed", "approved", "in_progress"):
            self.write("set_plan_status", plan_id, status)
        for step_id in self.plans[plan_id]:
            first, last = data.draw(
                st.sampled_from(
                    [("in_progress", "completed")] * 4
                    + [("skipped", None), ("in_progress", "failed"), ("blocked", "pending")]
                )
            )
            self.write("set_step_status", plan_id, step_id, first)
            if last is not None:
                self.write("set_step_status", plan_id, step_id, last)
        end = data.draw(st.sampled_from(["completed", "completed", "failed", "cancelled"]))
        self.write("set_plan_status", plan_id, end)

    # --- invariants ----------------------------------------------------------------------

    @invariant()
    def references_resolve(self) -> None:
        assert self.conn.execute("PRAGMA foreign_key_check").fetchall() == []
        foreign = self.conn.execute(
            "SELECT 1 FROM psg_step_dependencies d JOIN psg_steps a ON a.step_id = d.step_id"
            " JOIN psg_steps b ON b.step_id = d.depends_on WHERE a.plan_id != b.plan_id"
        ).fetchall()
        assert foreign == []

    @invariant()
    def steps_form_a_dag(self) -> None:
        deps: dict[str, list[str]] = {}
        for step_id, target in self.conn.execute(
            "SELECT step_id, depends_on FROM psg_step_dependencies"
        ):
            deps.setdefault(step_id, []).append(target)
        graphlib.TopologicalSorter(deps).prepare()  # raises CycleError on a cycle

    @invariant()
    def ids_are_lowercase_uuid4(self) -> None:
        for table, column in ID_TABLES:
            for (value,) in self.conn.execute(f"SELECT {column} FROM {table}"):
                assert UUID4.fullmatch(value), (table, value)

    @invariant()
    def lifecycles_hold(self) -> None:
        plans = dict(self.conn.execute("SELECT plan_id, status FROM psg_plans").fetchall())
        steps = self.conn.execute("SELECT step_id, plan_id, status FROM psg_steps").fetchall()
        status_of = {step_id: status for step_id, _, status in steps}
        for step_id, plan_id, status in steps:
            assert status in lifecycle.STEP_STATES
            if status == "in_progress":
                assert plans[plan_id] == "in_progress"
            if status in ("in_progress", "completed"):
                for (dep,) in self.conn.execute(
                    "SELECT depends_on FROM psg_step_dependencies WHERE step_id = ?", (step_id,)
                ):
                    assert status_of[dep] == "completed"
        for plan_id, status in plans.items():
            assert status in lifecycle.PLAN_STATES
            if status == "completed":
                assert all(s in lifecycle.STEP_DONE for _, p, s in steps if p == plan_id)

    @invariant()
    def segments_never_change(self) -> None:
        for segment_id, body in self.segments.items():
            row = self.conn.execute(
                "SELECT body FROM psg_trace_segments WHERE segment_id = ?", (segment_id,)
            ).fetchone()
            assert row == (body,)


PsgMachine.TestCase.settings = settings(
    max_examples=examples(40),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestPsgProperties = PsgMachine.TestCase

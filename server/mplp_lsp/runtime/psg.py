"""The project semantic graph: protocol nodes, their edges, and integrity on every write.

Every function here runs on the store's writer thread inside one transaction
(:meth:`StoreWriter.run`). A write either applies completely or raises :class:`Rejected`,
which rolls the whole transaction back, so a refused change leaves the graph exactly as it
was. The checks, in the order a write meets them:

* the object validates against its schema (``schemas/v2``), so ids are lowercase UUID v4;
* a new object starts in its lifecycle's first state (plan ``draft``, steps ``pending``);
* every reference resolves (plan → context, trace → context/plan, confirm → target,
  segment → parent segment; dependencies → steps of the same plan) and no id is reused;
* the steps of a plan form a DAG; a cycle is refused and named;
* status changes pass :mod:`mplp_lsp.runtime.lifecycle`, and a change older than the
  recorded one never moves a node backwards;
* trace segments are append-only (also enforced by triggers in the store).

Each write returns the events it caused (``pipeline_stage`` per status change, one
``graph_update`` per structural change, ``bulk`` when a write makes several), and records
them in ``psg_outbox`` in the same transaction; :mod:`mplp_lsp.runtime.psg_service` hands
them to the intake.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.objects import ObjectKind, validate_object
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.runtime import lifecycle
from mplp_lsp.runtime.graph_events import UpdateKind, graph_id, graph_update

NODE_TYPES: Final = (
    "context",
    "plan",
    "step",
    "trace",
    "trace_segment",
    "confirm",
    "pipeline",
    "file",
    "commit",
    "branch",
    "author",
)
EDGE_TYPES: Final = ("belongs_to", "depends_on", "targets", "follows", "caused_by")
_SAMPLE: Final = 100  # changes listed in one graph_update payload at most

Op = Literal["node_add", "node_update", "node_delete", "edge_add", "edge_update", "edge_delete"]


class Rejected(Exception):
    """A write the graph refuses; raising it inside the transaction rolls everything back."""

    def __init__(self, result: ValidationResult) -> None:
        super().__init__("; ".join(f"{e.path}: {e.message}" for e in result.errors))
        self.result = result

    @classmethod
    def single(cls, path: str, code: ErrorCode, message: str) -> Rejected:
        return cls(ValidationResult.single(path, code, message))


@dataclass(frozen=True, slots=True)
class GraphChange:
    op: Op
    node_type: str | None = None
    node_id: str | None = None
    edge_type: str | None = None
    source: str | None = None
    target: str | None = None

    def to_json(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (
                ("op", self.op),
                ("node_type", self.node_type),
                ("node_id", self.node_id),
                ("edge_type", self.edge_type),
                ("from", self.source),
                ("to", self.target),
            )
            if v is not None
        }


def node(node_type: str, node_id: str) -> GraphChange:
    return GraphChange("node_add", node_type=node_type, node_id=node_id)


def edge(edge_type: str, source: str, target: str) -> GraphChange:
    return GraphChange("edge_add", edge_type=edge_type, source=source, target=target)


@dataclass
class Outcome:
    """What one write did: its value (the object as now stored) and the events it caused."""

    value: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _instant(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("z", "Z"))


def _require_valid(kind: ObjectKind, data: Any, prefix: str = "") -> dict[str, Any]:
    result = validate_object(kind, data)
    if not result.ok:
        if prefix:
            result = ValidationResult.failure(
                type(issue)(
                    f"{prefix}.{issue.path}" if issue.path else prefix, issue.code, issue.message
                )
                for issue in result.errors
            )
        raise Rejected(result)
    assert isinstance(data, dict)
    return data


def _exists(conn: sqlite3.Connection, table: str, column: str, value: str) -> bool:
    # table and column are constants of this module, never input
    sql = f"SELECT 1 FROM {table} WHERE {column} = ?"  # noqa: S608
    return conn.execute(sql, (value,)).fetchone() is not None


_ID_TABLES: Final = (
    ("psg_contexts", "context_id"),
    ("psg_plans", "plan_id"),
    ("psg_steps", "step_id"),
    ("psg_confirms", "confirm_id"),
    ("psg_traces", "trace_id"),
    ("psg_trace_segments", "segment_id"),
    ("psg_pipelines", "node_id"),
)


def _require_new_id(conn: sqlite3.Connection, path: str, value: str) -> None:
    """Node ids are unique across the whole graph, not per type."""
    for table, column in _ID_TABLES:
        if _exists(conn, table, column, value):
            raise Rejected.single(path, ErrorCode.DUPLICATE_ID, f"{value} is already a node")


def _require_ref(conn: sqlite3.Connection, path: str, table: str, column: str, value: str) -> None:
    if not _exists(conn, table, column, value):
        kind = table.removeprefix("psg_").rstrip("s").replace("_segment", " segment")
        raise Rejected.single(
            path, ErrorCode.REFERENCE_UNRESOLVED, f"no {kind} {value} in the graph"
        )


# --- events --------------------------------------------------------------------------------


def _structural(
    conn: sqlite3.Connection,
    event_type: str,
    changes: Sequence[GraphChange],
    *,
    source_module: str,
    cause: str | None = None,
) -> dict[str, Any]:
    """One graph_update for a write's structural changes; ``bulk`` when there are several."""
    node_delta = sum(
        1 if c.op == "node_add" else -1 if c.op == "node_delete" else 0 for c in changes
    )
    edge_delta = sum(
        1 if c.op == "edge_add" else -1 if c.op == "edge_delete" else 0 for c in changes
    )
    kind: UpdateKind = changes[0].op if len(changes) == 1 else "bulk"
    payload: dict[str, Any] = {
        "changes": [c.to_json() for c in changes[:_SAMPLE]],
        "changes_complete": len(changes) <= _SAMPLE,
    }
    if cause is not None:
        payload["cause_event_id"] = cause
    event = graph_update(
        graph_id(conn), kind, event_type, payload, node_delta=node_delta, edge_delta=edge_delta
    )
    event["source_module"] = source_module
    return event


def pipeline_stage(
    *,
    pipeline_id: str,
    stage_id: str,
    stage_status: str,
    event_type: str,
    timestamp: str,
    stage_name: str | None,
    stage_order: int | None,
    payload: dict[str, Any],
    source_module: str,
) -> dict[str, Any]:
    """The one builder of ``pipeline_stage`` events."""
    event: dict[str, Any] = {
        "event_id": new_id(),
        "event_family": "pipeline_stage",
        "event_type": event_type,
        "timestamp": timestamp,
        "pipeline_id": pipeline_id,
        "stage_id": stage_id,
        "stage_status": stage_status,
        "source_module": source_module,
        "payload": payload,
    }
    if stage_name:
        event["stage_name"] = stage_name[:200]
    if stage_order is not None:
        event["stage_order"] = stage_order
    return event


def _record(conn: sqlite3.Connection, events: Iterable[dict[str, Any]]) -> None:
    conn.executemany(
        "INSERT INTO psg_outbox (event_id, kind, body) VALUES (?, ?, ?)",
        [(e["event_id"], e["event_family"], _canonical(e)) for e in events],
    )


def finish(conn: sqlite3.Connection, value: Any, events: list[dict[str, Any]]) -> Outcome:
    _record(conn, events)
    return Outcome(value, events)


def outbox(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT body FROM psg_outbox ORDER BY rowid")
    return [json.loads(body) for (body,) in rows]


def clear_outbox(conn: sqlite3.Connection, event_ids: Sequence[str]) -> None:
    conn.executemany("DELETE FROM psg_outbox WHERE event_id = ?", [(i,) for i in event_ids])


# --- Context ------------------------------------------------------------------------------


def create_context(conn: sqlite3.Connection, data: Any) -> Outcome:
    context = _require_valid(ObjectKind.CONTEXT, data)
    context_id = context["context_id"]
    _require_new_id(conn, "context_id", context_id)
    body = {k: v for k, v in context.items() if k != "status"}
    conn.execute(
        "INSERT INTO psg_contexts (context_id, status, created_at, body) VALUES (?, ?, ?, ?)",
        (context_id, context["status"], utc_timestamp(), _canonical(body)),
    )
    event = _structural(
        conn, "context_created", [node("context", context_id)], source_module="context"
    )
    return finish(conn, context, [event])


def get_context(conn: sqlite3.Connection, context_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT status, body FROM psg_contexts WHERE context_id = ?", (context_id,)
    ).fetchone()
    if row is None:
        return None
    context: dict[str, Any] = json.loads(row[1])
    context["status"] = row[0]
    return context


# --- Plan and Step ------------------------------------------------------------------------


def create_plan(conn: sqlite3.Connection, data: Any) -> Outcome:
    plan = _require_valid(ObjectKind.PLAN, data)
    plan_id, context_id, steps = plan["plan_id"], plan["context_id"], plan["steps"]
    if plan["status"] != lifecycle.INITIAL["plan"]:
        raise Rejected.single(
            "status", ErrorCode.INITIAL_STATUS, f"a new plan starts as draft, not {plan['status']}"
        )
    _require_new_id(conn, "plan_id", plan_id)
    _require_ref(conn, "context_id", "psg_contexts", "context_id", context_id)
    ids = [step["step_id"] for step in steps]
    for index, step in enumerate(steps):
        path = f"steps[{index}]"
        if step["status"] != lifecycle.INITIAL["step"]:
            raise Rejected.single(
                f"{path}.status",
                ErrorCode.INITIAL_STATUS,
                f"a new step starts as pending, not {step['status']}",
            )
        if step["step_id"] == plan_id or ids.index(step["step_id"]) != index:
            raise Rejected.single(
                f"{path}.step_id",
                ErrorCode.DUPLICATE_ID,
                f"{step['step_id']} is used twice in this plan",
            )
        _require_new_id(conn, f"{path}.step_id", step["step_id"])
        for dep_index, dep in enumerate(step.get("dependencies", ())):
            if dep not in ids:
                raise Rejected.single(
                    f"{path}.dependencies[{dep_index}]",
                    ErrorCode.DEPENDENCY_OUTSIDE_PLAN,
                    f"step {step['step_id']} depends on {dep}, which is not a step of this plan",
                )
    cycle = find_cycle({step["step_id"]: step.get("dependencies", []) for step in steps})
    if cycle:
        raise Rejected.single(
            "steps",
            ErrorCode.DEPENDENCY_CYCLE,
            "the steps depend on each other in a cycle: " + " → ".join(cycle),
        )
    now = utc_timestamp()
    body = {k: v for k, v in plan.items() if k not in ("status", "steps")}
    conn.execute(
        "INSERT INTO psg_plans (plan_id, context_id, status, status_at, created_at, body)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (plan_id, context_id, plan["status"], now, now, _canonical(body)),
    )
    changes = [node("plan", plan_id), edge("belongs_to", plan_id, context_id)]
    for position, step in enumerate(steps):
        step_body = {k: v for k, v in step.items() if k != "status"}
        conn.execute(
            "INSERT INTO psg_steps (step_id, plan_id, position, status, status_at, body)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (step["step_id"], plan_id, position, step["status"], now, _canonical(step_body)),
        )
        changes += [node("step", step["step_id"]), edge("belongs_to", step["step_id"], plan_id)]
    for step in steps:
        for dep in dict.fromkeys(step.get("dependencies", ())):
            conn.execute(
                "INSERT INTO psg_step_dependencies (step_id, depends_on) VALUES (?, ?)",
                (step["step_id"], dep),
            )
            changes.append(edge("depends_on", step["step_id"], dep))
    event = _structural(conn, "plan_created", changes, source_module="plan")
    return finish(conn, get_plan(conn, plan_id), [event])


def find_cycle(dependencies: Mapping[str, Sequence[str]]) -> list[str]:
    """A dependency cycle as ``[a, b, ..., a]``, or ``[]`` if the steps form a DAG."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in dependencies:
        if state.get(start):
            continue
        path: list[str] = []
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(dependencies.get(start, ())))]
        state[start] = 1
        path.append(start)
        while stack:
            current, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[current] = 2
            elif state.get(child) == 1:
                return [*path[path.index(child) :], child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(dependencies.get(child, ()))))
    return []


def get_plan(conn: sqlite3.Connection, plan_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT status, body FROM psg_plans WHERE plan_id = ?", (plan_id,)
    ).fetchone()
    if row is None:
        return None
    plan: dict[str, Any] = json.loads(row[1])
    plan["status"] = row[0]
    steps = []
    for status, body in conn.execute(
        "SELECT status, body FROM psg_steps WHERE plan_id = ? ORDER BY position", (plan_id,)
    ):
        step = json.loads(body)
        step["status"] = status
        steps.append(step)
    plan["steps"] = steps
    return plan


def _change_time(path: str, at: str | None, recorded: str, what: str) -> str:
    """The time a change happened; a change older than the recorded state is refused."""
    if at is None:
        return max(utc_timestamp(), recorded)
    try:
        moment = _instant(at)
    except ValueError:
        raise Rejected.single(path, ErrorCode.FORMAT, f"{at!r} is not a date-time") from None
    if moment.tzinfo is None:
        raise Rejected.single(path, ErrorCode.FORMAT, f"{at!r} has no UTC offset")
    if moment < _instant(recorded):
        raise Rejected.single(
            path,
            ErrorCode.STALE_CHANGE,
            f"{what} changed at {recorded}; a change dated {at} is older and would move it back",
        )
    return utc_timestamp(moment)


def set_plan_status(
    conn: sqlite3.Connection, plan_id: str, status: Any, at: str | None = None
) -> Outcome:
    row = conn.execute(
        "SELECT status, status_at, context_id, body FROM psg_plans WHERE plan_id = ?", (plan_id,)
    ).fetchone()
    if row is None:
        raise Rejected.single("plan_id", ErrorCode.NOT_FOUND, f"no plan {plan_id}")
    old, recorded, context_id, body = row
    if not isinstance(status, str):
        raise Rejected.single("status", ErrorCode.TYPE, "status must be a string")
    steps = conn.execute(
        "SELECT step_id, status, status_at, position, body FROM psg_steps WHERE plan_id = ?"
        " ORDER BY position",
        (plan_id,),
    ).fetchall()
    result = lifecycle.check_plan(old, status, [s[1] for s in steps])
    if not result.ok:
        raise Rejected(result)
    when = _change_time("timestamp", at, recorded, f"plan {plan_id}")
    conn.execute(
        "UPDATE psg_plans SET status = ?, status_at = ? WHERE plan_id = ?", (status, when, plan_id)
    )
    title = json.loads(body).get("title")
    events = [
        pipeline_stage(
            pipeline_id=plan_id,
            stage_id=plan_id,
            stage_status=lifecycle.PLAN_STAGE[status],
            event_type="plan_status_changed",
            timestamp=when,
            stage_name=title,
            stage_order=None,
            payload={
                "object_type": "plan",
                "plan_id": plan_id,
                "context_id": context_id,
                "from": old,
                "to": status,
            },
            source_module="plan",
        )
    ]
    if status in ("failed", "cancelled"):
        # A step runs only while its plan does: the plan's running steps fail with it.
        for step_id, step_status, _at, position, step_body in steps:
            if step_status == "in_progress":
                events.append(
                    _move_step(
                        conn,
                        plan_id,
                        context_id,
                        step_id,
                        step_status,
                        "failed",
                        when,
                        position,
                        step_body,
                        reason=f"plan {status}",
                    )
                )
    return finish(conn, get_plan(conn, plan_id), events)


def set_step_status(
    conn: sqlite3.Connection, plan_id: str, step_id: str, status: Any, at: str | None = None
) -> Outcome:
    plan = conn.execute(
        "SELECT status, context_id FROM psg_plans WHERE plan_id = ?", (plan_id,)
    ).fetchone()
    if plan is None:
        raise Rejected.single("plan_id", ErrorCode.NOT_FOUND, f"no plan {plan_id}")
    row = conn.execute(
        "SELECT status, status_at, position, body FROM psg_steps WHERE step_id = ? AND plan_id = ?",
        (step_id, plan_id),
    ).fetchone()
    if row is None:
        raise Rejected.single(
            "step_id", ErrorCode.NOT_FOUND, f"plan {plan_id} has no step {step_id}"
        )
    if not isinstance(status, str):
        raise Rejected.single("status", ErrorCode.TYPE, "status must be a string")
    old, recorded, position, body = row
    deps = dict(
        conn.execute(
            "SELECT d.depends_on, s.status FROM psg_step_dependencies d"
            " JOIN psg_steps s ON s.step_id = d.depends_on WHERE d.step_id = ?",
            (step_id,),
        ).fetchall()
    )
    result = lifecycle.check_step(old, status, plan_status=plan[0], dependency_states=deps)
    if not result.ok:
        raise Rejected(result)
    when = _change_time("timestamp", at, recorded, f"step {step_id}")
    event = _move_step(conn, plan_id, plan[1], step_id, old, status, when, position, body)
    # The step, not the whole plan: a plan may hold thousands of steps.
    return finish(conn, {**json.loads(body), "status": status}, [event])


_STEP_EVENT_TYPES: Final = {
    "in_progress": "step_started",
    "completed": "step_completed",
    "failed": "step_failed",
}


def _move_step(
    conn: sqlite3.Connection,
    plan_id: str,
    context_id: str,
    step_id: str,
    old: str,
    new: str,
    when: str,
    position: int,
    body: str,
    reason: str | None = None,
) -> dict[str, Any]:
    conn.execute(
        "UPDATE psg_steps SET status = ?, status_at = ? WHERE step_id = ?", (new, when, step_id)
    )
    step = json.loads(body)
    payload: dict[str, Any] = {
        "object_type": "step",
        "plan_id": plan_id,
        "step_id": step_id,
        "context_id": context_id,
        "from": old,
        "to": new,
    }
    if reason:
        payload["reason"] = reason
    return pipeline_stage(
        pipeline_id=plan_id,
        stage_id=step_id,
        stage_status=lifecycle.STEP_STAGE[new],
        event_type=_STEP_EVENT_TYPES.get(new, "step_status_changed"),
        timestamp=when,
        stage_name=step.get("description"),
        stage_order=step.get("order_index", position),
        payload=payload,
        source_module="plan",
    )


# --- Confirm ------------------------------------------------------------------------------

_TARGETS: Final = {
    "context": ("psg_contexts", "context_id"),
    "plan": ("psg_plans", "plan_id"),
    "trace": ("psg_traces", "trace_id"),
}


def create_confirm(conn: sqlite3.Connection, data: Any) -> Outcome:
    confirm = _require_valid(ObjectKind.CONFIRM, data)
    confirm_id, target_type, target_id = (
        confirm["confirm_id"],
        confirm["target_type"],
        confirm["target_id"],
    )
    _require_new_id(conn, "confirm_id", confirm_id)
    if target_type not in _TARGETS:
        raise Rejected.single(
            "target_type",
            ErrorCode.REFERENCE_UNRESOLVED,
            f"the graph holds no {target_type} nodes to confirm",
        )
    _require_ref(conn, "target_id", *_TARGETS[target_type], target_id)
    body = {k: v for k, v in confirm.items() if k != "status"}
    conn.execute(
        "INSERT INTO psg_confirms (confirm_id, target_type, target_id, status, body)"
        " VALUES (?, ?, ?, ?, ?)",
        (confirm_id, target_type, target_id, confirm["status"], _canonical(body)),
    )
    changes = [node("confirm", confirm_id), edge("targets", confirm_id, target_id)]
    event = _structural(conn, "confirm_created", changes, source_module="confirm")
    return finish(conn, confirm, [event])


def get_confirm(conn: sqlite3.Connection, confirm_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT status, body FROM psg_confirms WHERE confirm_id = ?", (confirm_id,)
    ).fetchone()
    if row is None:
        return None
    confirm: dict[str, Any] = json.loads(row[1])
    confirm["status"] = row[0]
    return confirm


# --- Trace and its segments ---------------------------------------------------------------


def create_trace(conn: sqlite3.Connection, data: Any) -> Outcome:
    trace = _require_valid(ObjectKind.TRACE, data)
    trace_id, context_id, plan_id = trace["trace_id"], trace["context_id"], trace.get("plan_id")
    _require_new_id(conn, "trace_id", trace_id)
    _require_ref(conn, "context_id", "psg_contexts", "context_id", context_id)
    changes = [node("trace", trace_id), edge("belongs_to", trace_id, context_id)]
    if plan_id is not None:
        _require_ref(conn, "plan_id", "psg_plans", "plan_id", plan_id)
        (owner,) = conn.execute(
            "SELECT context_id FROM psg_plans WHERE plan_id = ?", (plan_id,)
        ).fetchone()
        if owner != context_id:
            raise Rejected.single(
                "plan_id",
                ErrorCode.REFERENCE_UNRESOLVED,
                f"plan {plan_id} belongs to context {owner}, not {context_id}",
            )
        changes.append(edge("belongs_to", trace_id, plan_id))
    root = trace["root_span"]
    if root["trace_id"] != trace_id:
        raise Rejected.single(
            "root_span.trace_id",
            ErrorCode.REFERENCE_UNRESOLVED,
            "the root span must belong to this trace",
        )
    if root.get("context_id", context_id) != context_id:
        raise Rejected.single(
            "root_span.context_id",
            ErrorCode.REFERENCE_UNRESOLVED,
            "the root span must name the trace's context",
        )
    body = {k: v for k, v in trace.items() if k not in ("status", "segments")}
    conn.execute(
        "INSERT INTO psg_traces (trace_id, context_id, plan_id, status, body)"
        " VALUES (?, ?, ?, ?, ?)",
        (trace_id, context_id, plan_id, trace["status"], _canonical(body)),
    )
    changes += _insert_segments(conn, trace_id, trace.get("segments", []), "segments")
    event = _structural(conn, "trace_created", changes, source_module="trace")
    return finish(conn, get_trace(conn, trace_id), [event])


def set_trace_status(conn: sqlite3.Connection, trace_id: str, status: Any) -> Outcome:
    """Move a trace through its lifecycle; its segments stay as they are (append-only)."""
    row = conn.execute("SELECT status FROM psg_traces WHERE trace_id = ?", (trace_id,)).fetchone()
    if row is None:
        raise Rejected.single("trace_id", ErrorCode.NOT_FOUND, f"no trace {trace_id}")
    if not isinstance(status, str):
        raise Rejected.single("status", ErrorCode.TYPE, "status must be a string")
    result = lifecycle.check_table("trace", row[0], status)
    if not result.ok:
        raise Rejected(result)
    conn.execute("UPDATE psg_traces SET status = ? WHERE trace_id = ?", (status, trace_id))
    change = GraphChange("node_update", node_type="trace", node_id=trace_id)
    event = _structural(conn, "trace_status_changed", [change], source_module="trace")
    event["payload"].update({"from": row[0], "to": status})
    return finish(conn, get_trace(conn, trace_id), [event])


def append_segments(conn: sqlite3.Connection, trace_id: str, segments: Any) -> Outcome:
    if not _exists(conn, "psg_traces", "trace_id", trace_id):
        raise Rejected.single("trace_id", ErrorCode.NOT_FOUND, f"no trace {trace_id}")
    if not isinstance(segments, list) or not segments:
        raise Rejected.single(
            "segments", ErrorCode.MIN_ITEMS, "segments must be a non-empty list of trace segments"
        )
    changes = _insert_segments(conn, trace_id, segments, "segments")
    event = _structural(conn, "trace_segments_appended", changes, source_module="trace")
    return finish(conn, get_trace(conn, trace_id), [event])


def _insert_segments(
    conn: sqlite3.Connection, trace_id: str, segments: Sequence[Any], path: str
) -> list[GraphChange]:
    (position,) = conn.execute(
        "SELECT COALESCE(MAX(position) + 1, 0) FROM psg_trace_segments WHERE trace_id = ?",
        (trace_id,),
    ).fetchone()
    changes: list[GraphChange] = []
    for index, raw in enumerate(segments):
        where = f"{path}[{index}]"
        segment = _require_valid(ObjectKind.TRACE_SEGMENT, raw, where)
        segment_id, parent = segment["segment_id"], segment.get("parent_segment_id")
        _require_new_id(conn, f"{where}.segment_id", segment_id)
        if parent is not None:
            found = conn.execute(
                "SELECT trace_id FROM psg_trace_segments WHERE segment_id = ?", (parent,)
            ).fetchone()
            if found is None or found[0] != trace_id:
                raise Rejected.single(
                    f"{where}.parent_segment_id",
                    ErrorCode.REFERENCE_UNRESOLVED,
                    f"no segment {parent} in trace {trace_id}",
                )
        conn.execute(
            "INSERT INTO psg_trace_segments (segment_id, trace_id, parent_segment_id, position,"
            " body) VALUES (?, ?, ?, ?, ?)",
            (segment_id, trace_id, parent, position + index, _canonical(segment)),
        )
        changes += [node("trace_segment", segment_id), edge("belongs_to", segment_id, trace_id)]
        if parent is not None:
            changes.append(edge("follows", segment_id, parent))
    return changes


def refuse_segment_edit(conn: sqlite3.Connection, trace_id: str, segment_id: str) -> Outcome:
    """Segments never change; say so (or that there is no such segment)."""
    found = conn.execute(
        "SELECT 1 FROM psg_trace_segments WHERE segment_id = ? AND trace_id = ?",
        (segment_id, trace_id),
    ).fetchone()
    if found is None:
        raise Rejected.single(
            "segment_id", ErrorCode.NOT_FOUND, f"trace {trace_id} has no segment {segment_id}"
        )
    raise Rejected.single(
        "segment_id",
        ErrorCode.TRACE_SEGMENT_IMMUTABLE,
        f"segment {segment_id} is stored; trace segments are append-only",
    )


def get_trace(conn: sqlite3.Connection, trace_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT status, body FROM psg_traces WHERE trace_id = ?", (trace_id,)
    ).fetchone()
    if row is None:
        return None
    trace: dict[str, Any] = json.loads(row[1])
    trace["status"] = row[0]
    segments = [
        json.loads(body)
        for (body,) in conn.execute(
            "SELECT body FROM psg_trace_segments WHERE trace_id = ? ORDER BY position", (trace_id,)
        )
    ]
    if segments:
        trace["segments"] = segments
    return trace


# --- CI pipelines -------------------------------------------------------------------------

_CI_STAGE: Final = {
    "pending": "pending",
    "running": "running",
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "failed",  # pipeline_stage has no cancelled; the payload keeps the CI word
}
_CI_FINAL: Final = frozenset({"succeeded", "failed", "cancelled"})
_CI_RANK: Final = {"pending": 0, "running": 1, "succeeded": 2, "failed": 2, "cancelled": 2}


@dataclass(frozen=True, slots=True)
class CiRun:
    """A committed ci_event, reduced to what the pipeline node needs."""

    event_id: str
    timestamp: str
    payload: Mapping[str, Any]

    @property
    def happened_at(self) -> str:
        # The run's own clock when it has one: the envelope time is when we heard of it.
        payload = self.payload
        if payload["status"] in _CI_FINAL and payload.get("completed_at"):
            return str(payload["completed_at"])
        if payload["status"] == "running" and payload.get("started_at"):
            return str(payload["started_at"])
        return self.timestamp


def apply_ci(conn: sqlite3.Connection, runs: Sequence[CiRun]) -> Outcome:
    """Move pipeline nodes forward; a late or out-of-order event never moves one back."""
    events: list[dict[str, Any]] = []
    added: list[GraphChange] = []
    for run in sorted(runs, key=lambda r: _instant(r.happened_at)):
        p = run.payload
        key = (p["ci_provider"], p["pipeline_id"], p["run_id"])
        when = utc_timestamp(_instant(run.happened_at))
        row = conn.execute(
            "SELECT node_id, status, status_at FROM psg_pipelines"
            " WHERE ci_provider = ? AND pipeline_id = ? AND run_id = ?",
            key,
        ).fetchone()
        if row is None:
            node_id, old = new_id(), None
            conn.execute(
                "INSERT INTO psg_pipelines (node_id, ci_provider, pipeline_id, run_id, status,"
                " status_at, branch_name, commit_id, cause_event_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    node_id,
                    *key,
                    p["status"],
                    when,
                    p.get("branch_name"),
                    p.get("commit_id"),
                    run.event_id,
                ),
            )
            added.append(node("pipeline", node_id))
        else:
            node_id, old, recorded = row
            if (
                old == p["status"]
                or old in _CI_FINAL
                or _instant(when) < _instant(recorded)
                or _CI_RANK[p["status"]] < _CI_RANK[old]
            ):
                continue  # already known, final, or older: placed on the timeline, no move
            conn.execute(
                "UPDATE psg_pipelines SET status = ?, status_at = ?, cause_event_id = ?"
                " WHERE node_id = ?",
                (p["status"], when, run.event_id, node_id),
            )
        events.append(
            pipeline_stage(
                pipeline_id=node_id,
                stage_id=str(p["run_id"]),
                stage_status=_CI_STAGE[p["status"]],
                event_type="ci_pipeline_status_changed",
                timestamp=when,
                stage_name=str(p["pipeline_id"]),
                stage_order=None,
                payload={
                    "object_type": "pipeline",
                    "ci_provider": p["ci_provider"],
                    "ci_pipeline_id": p["pipeline_id"],
                    "run_id": p["run_id"],
                    "from": old,
                    "to": p["status"],
                    "cause_event_id": run.event_id,
                },
                source_module="ci",
            )
        )
    if added:
        events.insert(0, _structural(conn, "pipeline_created", added, source_module="ci"))
    return finish(conn, None, events)


# --- inspection (tests, status) -----------------------------------------------------------

PSG_TABLES: Final = (
    "psg_contexts",
    "psg_plans",
    "psg_steps",
    "psg_step_dependencies",
    "psg_confirms",
    "psg_traces",
    "psg_trace_segments",
    "psg_pipelines",
)


def dump(conn: sqlite3.Connection) -> str:
    """Every PSG row in a canonical order: equal strings mean an identical graph."""
    out = []
    for table in PSG_TABLES:
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()  # noqa: S608
        out.append(_canonical([table, [list(r) for r in rows]]))
    return "\n".join(out)


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        table.removeprefix("psg_"): int(
            conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608
        )
        for table in PSG_TABLES
    }

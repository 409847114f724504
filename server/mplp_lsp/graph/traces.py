"""Trace nodes and their segments; segments are append-only (the store's triggers agree)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from mplp_lsp.graph.changes import (
    GraphChange,
    WriteResult,
    canonical,
    edge,
    finish,
    node,
    structural,
)
from mplp_lsp.graph.integrity import (
    Rejected,
    exists,
    require_new_id,
    require_ref,
    require_valid,
)
from mplp_lsp.plans import transitions as lifecycle
from mplp_lsp.protocol.objects import ObjectKind
from mplp_lsp.protocol.result import ErrorCode


def create_trace(conn: sqlite3.Connection, data: Any) -> WriteResult:
    trace = require_valid(ObjectKind.TRACE, data)
    trace_id, context_id, plan_id = trace["trace_id"], trace["context_id"], trace.get("plan_id")
    require_new_id(conn, "trace_id", trace_id)
    require_ref(conn, "context_id", "psg_contexts", "context_id", context_id)
    changes = [node("trace", trace_id), edge("belongs_to", trace_id, context_id)]
    if plan_id is not None:
        require_ref(conn, "plan_id", "psg_plans", "plan_id", plan_id)
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
        (trace_id, context_id, plan_id, trace["status"], canonical(body)),
    )
    changes += _insert_segments(conn, trace_id, trace.get("segments", []), "segments")
    event = structural(conn, "trace_created", changes, source_module="trace")
    return finish(conn, get_trace(conn, trace_id), [event])


def set_trace_status(conn: sqlite3.Connection, trace_id: str, status: Any) -> WriteResult:
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
    event = structural(conn, "trace_status_changed", [change], source_module="trace")
    event["payload"].update({"from": row[0], "to": status})
    return finish(conn, get_trace(conn, trace_id), [event])


def append_segments(conn: sqlite3.Connection, trace_id: str, segments: Any) -> WriteResult:
    if not exists(conn, "psg_traces", "trace_id", trace_id):
        raise Rejected.single("trace_id", ErrorCode.NOT_FOUND, f"no trace {trace_id}")
    if not isinstance(segments, list) or not segments:
        raise Rejected.single(
            "segments", ErrorCode.MIN_ITEMS, "segments must be a non-empty list of trace segments"
        )
    changes = _insert_segments(conn, trace_id, segments, "segments")
    event = structural(conn, "trace_segments_appended", changes, source_module="trace")
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
        segment = require_valid(ObjectKind.TRACE_SEGMENT, raw, where)
        segment_id, parent = segment["segment_id"], segment.get("parent_segment_id")
        require_new_id(conn, f"{where}.segment_id", segment_id)
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
            (segment_id, trace_id, parent, position + index, canonical(segment)),
        )
        changes += [node("trace_segment", segment_id), edge("belongs_to", segment_id, trace_id)]
        if parent is not None:
            changes.append(edge("follows", segment_id, parent))
    return changes


def refuse_segment_edit(conn: sqlite3.Connection, trace_id: str, segment_id: str) -> WriteResult:
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

"""What one graph write produced: its structural changes, the events they become, its result.

Each write returns the events it caused (``pipeline_stage`` per status change, one
``graph_update`` per structural change, ``bulk`` when a write makes several) and records them
as pending graph events in the same transaction (:mod:`mplp_lsp.graph.pending`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from mplp_lsp.graph import pending
from mplp_lsp.graph.graph_events import UpdateKind, graph_id, graph_update
from mplp_lsp.protocol.envelope import new_id

_SAMPLE: Final = 100  # changes listed in one graph_update payload at most

Op = Literal["node_add", "node_update", "node_delete", "edge_add", "edge_update", "edge_delete"]


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
class WriteResult:
    """What one write did: its value (the object as now stored) and the events it caused."""

    value: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def structural(
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


def finish(conn: sqlite3.Connection, value: Any, events: list[dict[str, Any]]) -> WriteResult:
    """Record a write's events as pending in its own transaction and hand back its result."""
    pending.record(conn, [(e["event_id"], e["event_family"], canonical(e)) for e in events])
    return WriteResult(value, events)

"""The one builder of ``graph_update`` events, shared by every part of the PSG."""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.store.events import EventLog

UpdateKind = Literal[
    "node_add", "node_update", "node_delete", "edge_add", "edge_update", "edge_delete", "bulk"
]


def graph_id(conn: sqlite3.Connection) -> str:
    """This store's graph id, created on first use; call on the writer thread."""
    events = EventLog(conn)
    value = events.get_meta("graph_id")
    if value is None:
        value = new_id()
        events.set_meta("graph_id", value)
    return value


def graph_update(
    graph: str,
    update_kind: UpdateKind,
    event_type: str,
    payload: dict[str, Any],
    *,
    node_delta: int = 0,
    edge_delta: int = 0,
) -> dict[str, Any]:
    return {
        "event_id": new_id(),
        "event_family": "graph_update",
        "event_type": event_type,
        "timestamp": utc_timestamp(),
        "graph_id": graph,
        "update_kind": update_kind,
        "node_delta": node_delta,
        "edge_delta": edge_delta,
        "source_module": "psg",
        "payload": payload,
    }

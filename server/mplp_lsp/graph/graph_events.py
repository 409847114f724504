"""The one builder of ``graph_update`` events, shared by every part of the PSG."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.store.events import EventLog

UpdateKind = Literal[
    "node_add", "node_update", "node_delete", "edge_add", "edge_update", "edge_delete", "bulk"
]


# A transaction changing more nodes than this is reported as one `bulk` graph_update with its
# deltas (a checkout, a formatter run over the tree), not one event per node.
BULK_THRESHOLD = 64
BULK_SAMPLE = 100  # node ids listed in a bulk event


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


def bulk_update(
    graph: str,
    event_type: str,
    *,
    kinds: Iterable[str],
    node_ids: Sequence[str],
    node_delta: int,
    edge_delta: int = 0,
    total: int | None = None,
    **payload: Any,
) -> dict[str, Any]:
    """One ``bulk`` event for many changes: counts by kind and a sample of the node ids
    (``total``: how many ids there are when ``node_ids`` is already a sample)."""
    body = {
        **payload,
        "changes": dict(Counter(kinds)),
        "node_ids": list(node_ids[:BULK_SAMPLE]),
        "node_ids_complete": (len(node_ids) if total is None else total) <= BULK_SAMPLE,
    }
    return graph_update(
        graph, "bulk", event_type, body, node_delta=node_delta, edge_delta=edge_delta
    )

"""Rollback by PSG snapshot (spec §6.5 a): take one before a plan runs, restore it on failure.

What a plan's actions change in the graph is the world it acts on: the file nodes its file
operations and tools touched. The snapshot holds those rows; restoring puts them back exactly
(nodes added since are removed, removed ones come back, changed ones get their old facts) in
one transaction, with one ``graph_update`` that names the undoing changes (negative
``node_delta`` for nodes removed). The plan's and steps' statuses and the Trace are history,
not world state: the failure stays recorded (a failed plan is final), and so does the
recovery.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Final

from mplp_lsp.graph import snapshots
from mplp_lsp.graph.changes import WriteResult, finish
from mplp_lsp.graph.graph_events import UpdateKind, graph_id, graph_update
from mplp_lsp.protocol.envelope import utc_timestamp

_COLUMNS: Final = "path, last_modified, size, mtime_ns, content_hash, inode, updated_seq"
_SAMPLE: Final = 100

Row = tuple[Any, ...]


@dataclass(frozen=True)
class PsgSnapshot:
    taken_at: str
    files: dict[str, Row]


def take_snapshot(conn: sqlite3.Connection) -> PsgSnapshot:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM psg_files")  # noqa: S608
    return PsgSnapshot(utc_timestamp(), {row[0]: tuple(row) for row in rows})


def restore_snapshot(conn: sqlite3.Connection, snapshot: PsgSnapshot) -> WriteResult:
    """Make the file nodes what they were; on the writer thread, in one transaction."""
    now = take_snapshot(conn).files
    changes: list[dict[str, str]] = []
    for path in sorted(now.keys() - snapshot.files.keys()):
        conn.execute("DELETE FROM psg_files WHERE path = ?", (path,))
        snapshots.release(conn, now[path][4])
        changes.append({"op": "node_delete", "node_type": "file", "node_id": path})
    for path, row in sorted(snapshot.files.items()):
        if now.get(path) == row:
            continue
        conn.execute(
            f"INSERT OR REPLACE INTO psg_files ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
            row,
        )
        if path in now:
            snapshots.release(conn, now[path][4])
        op = "node_update" if path in now else "node_add"
        changes.append({"op": op, "node_type": "file", "node_id": path})
    if not changes:
        return finish(conn, {"changes": 0}, [])
    delta = sum(
        1 if c["op"] == "node_add" else -1 if c["op"] == "node_delete" else 0 for c in changes
    )
    kind: UpdateKind = changes[0]["op"] if len(changes) == 1 else "bulk"  # type: ignore[assignment]
    event = graph_update(
        graph_id(conn),
        kind,
        "psg_snapshot_restored",
        {
            "changes": changes[:_SAMPLE],
            "changes_complete": len(changes) <= _SAMPLE,
            "snapshot_taken_at": snapshot.taken_at,
        },
        node_delta=delta,
    )
    event["source_module"] = "core"
    return finish(conn, {"changes": len(changes)}, [event])

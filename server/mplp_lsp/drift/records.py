"""Drift findings in the store (table ``psg_drift``); every writer runs on the writer thread."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection, Iterable
from dataclasses import replace
from typing import Any

from mplp_lsp.drift.model import DiskFacts, Drift, Reason
from mplp_lsp.drift.scan import ScanResult

log = logging.getLogger(__name__)

# The column list is a constant; every value is bound, never formatted in (hence the S608s).
_COLUMNS = (
    "path, reason, detected_at, recorded_at, disk_size, disk_mtime_ns, disk_inode, disk_hash, "
    "note, state"
)
_SELECT_ONE = f"SELECT {_COLUMNS} FROM psg_drift WHERE path = ?"  # noqa: S608
Changes = dict[str, Drift | None]  # path -> its drift now, None once it has none

log = logging.getLogger(__name__)


def load(conn: sqlite3.Connection, paths: Iterable[str] | None = None) -> dict[str, Drift]:
    if paths is None:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM psg_drift").fetchall()  # noqa: S608
    else:
        rows = [row for path in paths for row in conn.execute(_SELECT_ONE, (path,))]
    found: dict[str, Drift] = {}
    for row in rows:
        try:
            found[str(row[0])] = _drift(row)
        except (TypeError, ValueError):
            # A salvaged store may hold damaged text; the next scan finds the drift again.
            log.warning("drift: an unreadable finding for %r is dropped", row[0])
    return found


def _drift(row: tuple[Any, ...]) -> Drift:
    path, reason, detected, recorded, size, mtime, inode, digest, note, state = row
    disk = None
    if size is not None and mtime is not None and inode is not None:
        disk = DiskFacts(int(size), int(mtime), int(inode), digest)
    return Drift(str(path), Reason(str(reason)), str(detected), recorded, disk, note, str(state))


def store(
    conn: sqlite3.Connection,
    outcome: ScanResult,
    *,
    scope: Collection[str] | None,
    keep: Collection[str] = (),
) -> Changes:
    """Write a check's findings. ``scope``: the paths checked (None: every node, a full scan);
    drift of a checked path that is no longer found is cleared. ``keep``: paths whose old
    findings stand (they changed while a full scan ran; a re-check follows)."""
    existing = load(conn, None if scope is None else [*scope, *outcome.ignored])
    changes: Changes = {}
    found: set[str] = set()
    for drift in outcome.drifts:
        if drift.path in keep:
            continue
        found.add(drift.path)
        previous = existing.get(drift.path)
        if previous is not None and (previous.reason, previous.disk) == (drift.reason, drift.disk):
            if previous.note == drift.note or drift.note is None:
                continue  # the same finding: it keeps its "since" and a deferral
            # the same finding with a new note: it keeps its "since" and its state
            drift = replace(drift, detected_at=previous.detected_at, state=previous.state)
        put(conn, drift)
        changes[drift.path] = drift
    checked = existing.keys() if scope is None else {*scope, *outcome.ignored}
    for path in checked:
        if path not in found and path not in keep and path in existing:
            clear(conn, path)
            changes[path] = None
    for path, disk in outcome.touched:
        # Same content, new stat: refresh the facts so the next scan need not hash it again.
        conn.execute(
            "UPDATE psg_files SET size = ?, mtime_ns = ?, inode = ? "
            "WHERE path = ? AND content_hash IS ?",
            (disk.size, disk.mtime_ns, disk.inode, path, disk.content_hash),
        )
    return changes


def put(conn: sqlite3.Connection, drift: Drift) -> None:
    disk = drift.disk
    conn.execute(
        f"INSERT OR REPLACE INTO psg_drift({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
        (
            drift.path,
            str(drift.reason),
            drift.detected_at,
            drift.recorded_at,
            disk.size if disk else None,
            disk.mtime_ns if disk else None,
            disk.inode if disk else None,
            disk.content_hash if disk else None,
            drift.note,
            drift.state,
        ),
    )


def clear(conn: sqlite3.Connection, path: str) -> None:
    conn.execute("DELETE FROM psg_drift WHERE path = ?", (path,))


def count(conn: sqlite3.Connection) -> tuple[int, int]:
    """(open, deferred) drift counts."""
    rows = dict(conn.execute("SELECT state, COUNT(*) FROM psg_drift GROUP BY state").fetchall())
    return int(rows.get("open", 0)), int(rows.get("deferred", 0))

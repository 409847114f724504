"""How long the event log keeps events: by age and by the store's size, oldest first.

The log is removed from its old end only, like a journal's: everything stored before a
*horizon* (a ``seq``) goes, except what must stay:

* an event the forwarding outbox still has to send, that the remote refused and the user
  may requeue, or that is held for another remote (``outbox``, ``outbox_dead``,
  ``outbox_held``): retention never decides for a remote;
* an event the store's consumers have not handled yet (the owner drains its bus first and
  cuts only below what it drained, ``upto``): the project graph must still be derived
  from it;
* the newest event: ``seq`` numbers the log, and SQLite would hand the number out again.

The horizon by age is the first event stored less than ``max_age_days`` ago (stored, not
happened: an event emitted today about last year is kept for the same time as any other).
Past ``max_bytes`` the horizon moves on by as many events as the excess holds, estimated
from the log's average row; the owner removes in slices and measures again after each.

Removing events keeps the timeline's hourly counts true (the removed rows are subtracted)
and leaves their dedup keys gone: the same event submitted again after it left the log is
stored again. Everything here runs on the writer's connection, one short transaction per
call.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import transaction
from mplp_lsp.store.events import EventLog

__all__ = ["SLICE", "Horizon", "Policy", "horizon", "remove_events", "store_bytes"]

SLICE: Final = 2_000  # events removed per transaction: a few milliseconds of the writer
# How many events retention removed in all (the counters table): a salvage counts its loss
# against the log's highest seq less these (mplp_lsp.store.salvage).
REMOVED_COUNTER: Final = "retention_removed"

# The events that stay whatever their age: queued for a sink (after its cursor, or a row),
# dead-lettered or held for a remote.
_KEPT: Final = (
    "seq NOT IN (SELECT seq FROM outbox) AND seq NOT IN (SELECT seq FROM outbox_dead)"
    " AND seq NOT IN (SELECT seq FROM outbox_held)"
    " AND seq <= (SELECT coalesce(min(cursor), seq) FROM outbox_sinks WHERE enabled)"
)


@dataclass(frozen=True, slots=True)
class Policy:
    """``max_age_days`` 0 and ``max_bytes`` 0 mean no limit of that kind."""

    max_age_days: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Horizon:
    """Where the log would be cut now: events below ``seq`` go (but those kept), ``removable``
    of them; ``reason`` is ``age``, ``size`` or None (nothing to remove)."""

    seq: int
    removable: int
    reason: str | None
    oldest_kept: str | None  # when the first event kept was stored


def store_bytes(conn: sqlite3.Connection) -> int:
    """The bytes the store's pages hold (the file's size less its free pages)."""
    pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    return (pages - free) * size


def horizon(
    conn: sqlite3.Connection,
    policy: Policy,
    now: datetime,
    *,
    other_bytes: int = 0,
    upto: int | None = None,
) -> Horizon:
    """Where retention cuts the log now, at most up to ``upto`` (the newest event handled).
    ``other_bytes``: what the store holds besides the event log that retention frees with it
    (file snapshots), for the size estimate."""
    first, last = conn.execute("SELECT min(seq), max(seq) FROM events").fetchone()
    if first is None:
        return Horizon(0, 0, None, None)
    limit = int(last) if upto is None else min(int(last), upto)  # the newest stays
    cut, reason = int(first), None
    if policy.max_age_days:
        cutoff = utc_timestamp(now - timedelta(days=policy.max_age_days))
        by_age = _first_stored_since(conn, cutoff, int(first), limit)
        if by_age > cut:
            cut, reason = by_age, "age"
    if policy.max_bytes:
        excess = store_bytes(conn) - policy.max_bytes
        if excess > 0:
            by_size = _past(conn, cut, _events_holding(conn, excess, other_bytes), limit)
            if by_size > cut:
                cut, reason = by_size, "size"
    removable = int(
        conn.execute(f"SELECT count(*) FROM events WHERE seq < ? AND {_KEPT}", (cut,)).fetchone()[0]  # noqa: S608
    )
    kept = conn.execute(
        "SELECT received_at FROM events WHERE seq >= ? ORDER BY seq LIMIT 1", (cut,)
    ).fetchone()
    return Horizon(cut, removable, reason if removable else None, kept[0] if kept else None)


def remove_events(conn: sqlite3.Connection, below: int, limit: int = SLICE) -> int:
    """Remove up to ``limit`` of the oldest removable events below ``below``, in one
    transaction, with their share of the timeline's hourly counts; returns how many."""
    with transaction(conn):
        seqs = [
            int(row[0])
            for row in conn.execute(
                f"SELECT seq FROM events WHERE seq < ? AND {_KEPT} ORDER BY seq LIMIT ?",  # noqa: S608
                (below, limit),
            )
        ]
        if not seqs:
            return 0
        low, high = seqs[0], seqs[-1]
        _uncount(conn, low, high)
        gone = conn.execute(
            f"DELETE FROM events WHERE seq BETWEEN ? AND ? AND {_KEPT}",  # noqa: S608
            (low, high),
        ).rowcount
        conn.execute(
            "INSERT INTO counters (name, value) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            (REMOVED_COUNTER, gone),
        )
        return int(gone)


def _first_stored_since(conn: sqlite3.Connection, cutoff: str, first: int, limit: int) -> int:
    """The first ``seq`` (at most ``limit``) stored at or after ``cutoff``. Walks the log from
    its old end, so the cost is the number of events older than the cutoff."""
    seq = first
    while seq < limit:
        rows = conn.execute(
            "SELECT seq, received_at FROM events WHERE seq >= ? AND seq < ? ORDER BY seq LIMIT ?",
            (seq, limit, SLICE),
        ).fetchall()
        for found, received_at in rows:
            if received_at >= cutoff:
                return int(found)
        if len(rows) < SLICE:
            break
        seq = int(rows[-1][0]) + 1
    return limit


def _events_holding(conn: sqlite3.Connection, excess: int, other_bytes: int) -> int:
    """About how many of the oldest events hold ``excess`` bytes: the log's share of the
    store divided by its rows."""
    count = sum(EventLog(conn).counts_by_kind().values())
    if count == 0:
        return 0
    per_event = max(1, (store_bytes(conn) - other_bytes) // count)
    return -(-excess // per_event)


def _past(conn: sqlite3.Connection, start: int, count: int, limit: int) -> int:
    """The ``seq`` ``count`` events after ``start`` (at most ``limit``)."""
    row = conn.execute(
        "SELECT seq FROM events WHERE seq >= ? ORDER BY seq LIMIT 1 OFFSET ?", (start, count)
    ).fetchone()
    return limit if row is None else min(int(row[0]), limit)


# The timeline's fold position (mplp_lsp.ui.timeline): rows up to it are in timeline_hours.
_FOLDED_KEY: Final = "timeline.rolled_seq"


def _uncount(conn: sqlite3.Connection, low: int, high: int) -> None:
    """Take the events of ``[low, high]`` about to go out of the timeline's hourly counts
    (only those already folded into them; the rest were never counted)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_FOLDED_KEY,)).fetchone()
    folded = min(high, int(row[0])) if row and str(row[0]).isdigit() else low - 1
    if folded < low:
        return
    gone = conn.execute(
        "SELECT count(*), substr(occurred_at, 1, 13), kind FROM events"  # noqa: S608
        f" WHERE seq BETWEEN ? AND ? AND {_KEPT} GROUP BY 2, 3",
        (low, folded),
    ).fetchall()
    conn.executemany(
        "UPDATE timeline_hours SET count = count - ? WHERE hour = ? AND kind = ?", gone
    )
    conn.execute("DELETE FROM timeline_hours WHERE count <= 0")

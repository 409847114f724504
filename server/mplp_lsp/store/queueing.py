"""Queuing accepted events for every forwarding sink, inside the appending transaction.

A sink (``outbox_sinks``, see :mod:`mplp_lsp.store.database`) has a cursor in the event log:
while it is enabled, every event after its cursor is pending for it. So queuing an appended
batch is one counter update for every enabled sink, in the transaction that stores the
events: "accepted" and "queued for every sink" can never disagree, and a second sink costs
the append nothing per event. Entries pending out of order (requeued dead letters, entries
released from ``outbox_held``, what a migration or a salvage found) are rows of ``outbox``,
always at or before their sink's cursor, so a sink's pending entries in ``seq`` order are its
rows, then the events after its cursor.

``pending`` and ``pending_bytes`` count both; whatever changes them in bulk calls
:func:`recount` afterwards.

Overflow policy: past ``budget_bytes`` the oldest pending entries of that sink leave it
(their events stay in the local log) and are counted in its ``overflow_dropped``.
"""

from __future__ import annotations

import json
import sqlite3
from itertools import accumulate
from typing import Final

__all__ = [
    "BODY_BYTES",
    "COLLECTOR",
    "advance_cursor",
    "apply_budget",
    "queue_appended",
    "recount",
    "recount_held",
]

# Entries examined per round when dropping over the budget: the oldest few usually cover
# the excess of one batch.
_TRIM_CHUNK: Final = 512
# The sink the remote* settings configure, and the one every store had before sinks.
COLLECTOR: Final = "collector"
# The size an entry counts for: its stored JSON's length in bytes.
BODY_BYTES: Final = "length(CAST(body AS BLOB))"
# meta key of the id this store's envelopes are forwarded under (a salvage ends the stream)
STREAM_META_KEY: Final = "forward.stream"
# meta key of the stream's write key: the remote binds the stream to it at first contact
STREAM_KEY_META_KEY: Final = "forward.stream_key"
# meta key of the count of held entries per remote, {remote: count}, kept by recount_held
HELD_META_KEY: Final = "forward.held"


def queue_appended(conn: sqlite3.Connection, after_seq: int) -> int:
    """Count the events stored after ``after_seq`` as pending for every enabled sink;
    returns how many events that was for the sinks (0 when none is enabled).

    Runs inside the caller's open transaction (the append's).
    """
    if conn.execute("SELECT 1 FROM outbox_sinks WHERE enabled LIMIT 1").fetchone() is None:
        return 0
    added, size = conn.execute(
        f"SELECT count(*), coalesce(sum({BODY_BYTES}), 0) FROM events WHERE seq > ?",  # noqa: S608
        (after_seq,),
    ).fetchone()
    if added:
        conn.execute(
            "UPDATE outbox_sinks SET pending = pending + ?, pending_bytes = pending_bytes + ?"
            " WHERE enabled",
            (added, size),
        )
        apply_budget(conn)
    return int(added)


def recount(conn: sqlite3.Connection, sink: int | None = None) -> None:
    """Set ``pending`` and ``pending_bytes`` of ``sink`` (every sink for None) from its rows
    and the events after its cursor (after a bulk change)."""
    conn.execute(
        "UPDATE outbox_sinks AS s SET (pending, pending_bytes) = ("  # noqa: S608 (a constant)
        " SELECT coalesce(sum(n), 0), coalesce(sum(b), 0) FROM ("
        "  SELECT count(*) AS n, sum(o.bytes) AS b FROM outbox AS o WHERE o.sink = s.id"
        f"  UNION ALL SELECT count(*), sum({BODY_BYTES}) FROM events"
        "   WHERE s.enabled AND seq > s.cursor))"
        " WHERE ?1 IS NULL OR s.id = ?1",
        (sink,),
    )


def advance_cursor(conn: sqlite3.Connection, sink: int, to_seq: int, *, keep: str) -> None:
    """Move ``sink``'s cursor forward to ``to_seq``; the events passed over that the JSON
    array ``keep`` does not name stay pending, as rows (normally there are none: the entries
    taken are the events right after the cursor). Counters are the caller's."""
    conn.execute(
        f"INSERT INTO outbox (sink, seq, bytes) SELECT ?1, seq, {BODY_BYTES} FROM events"  # noqa: S608
        " WHERE seq > (SELECT cursor FROM outbox_sinks WHERE id = ?1) AND seq <= ?2"
        " AND seq NOT IN (SELECT value FROM json_each(?3)) ON CONFLICT DO NOTHING",
        (sink, to_seq, keep),
    )
    conn.execute("UPDATE outbox_sinks SET cursor = max(cursor, ?) WHERE id = ?", (to_seq, sink))


def recount_held(conn: sqlite3.Connection) -> None:
    """Record the count of held entries per remote (after any change of ``outbox_held``), so
    status reads one row however many are held."""
    counts = dict(conn.execute("SELECT remote, count(*) FROM outbox_held GROUP BY remote"))
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (HELD_META_KEY, json.dumps(counts, sort_keys=True)),
    )


def apply_budget(conn: sqlite3.Connection) -> int:
    """Drop the oldest entries of every sink over its budget; returns how many in all.

    Runs inside the caller's open transaction.
    """
    over = conn.execute("SELECT id FROM outbox_sinks WHERE pending_bytes > budget_bytes")
    return sum(_trim(conn, sink) for (sink,) in over.fetchall())


def _trim(conn: sqlite3.Connection, sink: int) -> int:
    dropped = 0
    while True:
        excess, cursor, enabled = conn.execute(
            "SELECT pending_bytes - budget_bytes, cursor, enabled FROM outbox_sinks WHERE id = ?",
            (sink,),
        ).fetchone()
        if excess <= 0:
            break
        oldest = conn.execute(
            "SELECT seq, bytes FROM outbox WHERE sink = ? ORDER BY seq LIMIT ?",
            (sink, _TRIM_CHUNK),
        ).fetchall()
        in_rows = bool(oldest)
        if not in_rows and enabled:
            oldest = conn.execute(
                f"SELECT seq, {BODY_BYTES} FROM events WHERE seq > ? ORDER BY seq LIMIT ?",  # noqa: S608
                (cursor, _TRIM_CHUNK),
            ).fetchall()
        if not oldest:
            break
        # Up to the first entry whose running total covers the excess, or the whole chunk.
        totals = list(zip(oldest, accumulate(size for _, size in oldest), strict=True))
        count, freed = next(
            ((n, total) for n, ((_, _), total) in enumerate(totals, 1) if total >= excess),
            (len(totals), totals[-1][1]),
        )
        cut = oldest[count - 1][0]
        if in_rows:
            conn.execute("DELETE FROM outbox WHERE sink = ? AND seq <= ?", (sink, cut))
        else:
            conn.execute("UPDATE outbox_sinks SET cursor = ? WHERE id = ?", (cut, sink))
        conn.execute(
            "UPDATE outbox_sinks SET pending = pending - ?, pending_bytes = pending_bytes - ?,"
            " overflow_dropped = overflow_dropped + ? WHERE id = ?",
            (count, freed, count, sink),
        )
        dropped += count
    return dropped

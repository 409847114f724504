"""Putting accepted events into the forwarding outbox, inside the appending transaction.

The outbox (``outbox`` and ``outbox_state``, see :mod:`mplp_lsp.store.database`) holds the
``seq`` of each event still to be sent. An event is queued by the same transaction that
stores it, so "accepted" and "queued for the remote" can never disagree: the event log
calls :func:`queue_appended` after its insert, before ``COMMIT``.

Entries are added per batch (one ``INSERT ... SELECT`` and one counter update for all the
events of an append), not per event: the per-event triggers that did this before cost a
quarter of an enqueue (bench/bench_forward.py). Entries leaving the outbox (delivered,
dead-lettered, dropped) are still counted by the ``outbox_removed`` trigger, one row at a
time, because they leave by seq from several places. Everything else that adds entries
(requeued dead letters, a salvage) calls :func:`recount` afterwards.

Overflow policy: past ``budget_bytes`` the oldest pending entries leave the outbox (their
events stay in the local log) and are counted in ``overflow_dropped``.
"""

from __future__ import annotations

import json
import sqlite3
from itertools import accumulate
from typing import Final

__all__ = ["apply_budget", "queue_appended", "recount", "recount_held"]

# Entries examined per round when dropping over the budget: the oldest few usually cover
# the excess of one batch.
_TRIM_CHUNK: Final = 512
# meta key of the id this store's envelopes are forwarded under (a salvage ends the stream)
STREAM_META_KEY: Final = "forward.stream"
# meta key of the stream's write key: the remote binds the stream to it at first contact
STREAM_KEY_META_KEY: Final = "forward.stream_key"
# meta key of the remote the outbox's entries are queued for (mplp_lsp.forward.held)
QUEUE_REMOTE_META_KEY: Final = "forward.remote"
# meta key of the count of held entries per remote, {remote: count}, kept by recount_held
HELD_META_KEY: Final = "forward.held"


def queue_appended(conn: sqlite3.Connection, after_seq: int) -> int:
    """Queue the events stored after ``after_seq`` if forwarding is on; returns how many.

    Runs inside the caller's open transaction (the append's).
    """
    (enabled,) = conn.execute("SELECT enabled FROM outbox_state WHERE id = 1").fetchone()
    if not enabled:
        return 0
    added = conn.execute(
        "INSERT INTO outbox (seq, bytes)"
        " SELECT seq, length(CAST(body AS BLOB)) FROM events WHERE seq > ?",
        (after_seq,),
    ).rowcount
    if added:
        conn.execute(
            "UPDATE outbox_state SET pending = pending + ?, pending_bytes = pending_bytes"
            " + (SELECT coalesce(sum(bytes), 0) FROM outbox WHERE seq > ?) WHERE id = 1",
            (added, after_seq),
        )
        apply_budget(conn)
    return added


def recount(conn: sqlite3.Connection) -> None:
    """Set ``pending`` and ``pending_bytes`` from the table (after a bulk change)."""
    conn.execute(
        "UPDATE outbox_state SET (pending, pending_bytes) ="
        " (SELECT count(*), coalesce(sum(bytes), 0) FROM outbox) WHERE id = 1"
    )


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
    """Drop the oldest entries until the outbox fits its budget; returns how many.

    Runs inside the caller's open transaction.
    """
    dropped = 0
    while True:
        (excess,) = conn.execute(
            "SELECT pending_bytes - budget_bytes FROM outbox_state WHERE id = 1"
        ).fetchone()
        if excess <= 0:
            break
        oldest = conn.execute(
            "SELECT seq, bytes FROM outbox ORDER BY seq LIMIT ?", (_TRIM_CHUNK,)
        ).fetchall()
        if not oldest:
            break
        # Up to the first entry whose running total covers the excess, or the whole chunk.
        totals = zip(oldest, accumulate(size for _, size in oldest), strict=True)
        cut = next((seq for (seq, _), freed in totals if freed >= excess), oldest[-1][0])
        dropped += conn.execute("DELETE FROM outbox WHERE seq <= ?", (cut,)).rowcount
    if dropped:
        conn.execute(
            "UPDATE outbox_state SET overflow_dropped = overflow_dropped + ? WHERE id = 1",
            (dropped,),
        )
    return dropped

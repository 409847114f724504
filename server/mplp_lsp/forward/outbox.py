"""The outbox tables (migration 2 in :mod:`mplp_lsp.store.database`), synchronously.

Every function takes a connection and is meant to run on the store's writer thread
(``StoreWriter.run`` for writes, ``StoreWriter.read`` for reads). Entries are put in by the
event log's append inside the intake's own transaction (:mod:`mplp_lsp.store.queueing`),
so nothing here enqueues new events; this module reads entries with their bodies, and
removes them as delivered, dead-lettered or dropped, each counted in ``outbox_state`` in
the same transaction.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

from mplp_lsp.forward.held import held_counts, queue_remote
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import transaction
from mplp_lsp.store.queueing import (
    STREAM_KEY_META_KEY,
    STREAM_META_KEY,
    apply_budget,
    recount,
)

__all__ = [
    "STREAM_META_KEY",
    "Backlog",
    "DeadLetter",
    "Entry",
    "OutboxState",
    "ack",
    "add_quarantined",
    "backlog_after",
    "dead_letter",
    "dead_letters",
    "disable",
    "enable",
    "peek",
    "read_state",
    "record_failure",
    "requeue_dead",
    "stream_id",
    "trim_to_budget",
]

_ERROR_LIMIT: Final = 500


@dataclass(frozen=True, slots=True)
class Entry:
    """A pending envelope: its per-store sequence number, id and stored JSON."""

    seq: int
    event_id: str
    body: str


@dataclass(frozen=True, slots=True)
class OutboxState:
    enabled: bool
    budget_bytes: int
    pending: int
    pending_bytes: int
    delivered: int
    dead_lettered: int  # refusals ever made (an envelope refused again counts again)
    dead_letters: int  # envelopes in the dead-letter table now
    overflow_dropped: int
    quarantined: int
    batches_sent: int
    failed_attempts: int
    last_success_at: str | None
    last_error: str | None
    last_error_at: str | None
    oldest_pending_at: str | None
    queued_for: str | None  # the remote the pending entries were queued for
    held: dict[str, int]  # entries held for other remotes, per remote (mplp_lsp.forward.held)


def enable(conn: sqlite3.Connection, *, budget_bytes: int) -> tuple[str, str]:
    """Start queuing accepted events (from this commit on); the stream id and its write key.

    Queuing stays on for this store until :func:`disable`: a later run without a remote
    keeps queuing, so nothing accepted in between is missed (docs/forwarding.md). The key is
    made with the stream (a store forwarding before keys existed gets one now); the remote
    binds the stream to the first key it sees, so no other store can write into it.
    """
    if budget_bytes < 1:
        raise ValueError(f"budget_bytes must be >= 1, got {budget_bytes}")
    with transaction(conn):
        conn.execute(
            "UPDATE outbox_state SET enabled = 1, budget_bytes = ? WHERE id = 1", (budget_bytes,)
        )
        stream = _meta_or_new(conn, STREAM_META_KEY, lambda: str(uuid.uuid4()))
        key = _meta_or_new(conn, STREAM_KEY_META_KEY, lambda: secrets.token_urlsafe(32))
    return stream, key


def _meta_or_new(conn: sqlite3.Connection, name: str, new: Callable[[], str]) -> str:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (name,)).fetchone()
    if row is not None:
        return str(row[0])
    value = new()
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (name, value))
    return value


def disable(conn: sqlite3.Connection) -> None:
    """Stop queuing new events; entries already pending stay."""
    with transaction(conn):
        conn.execute("UPDATE outbox_state SET enabled = 0 WHERE id = 1")


def stream_id(conn: sqlite3.Connection) -> str | None:
    """The id this store's envelopes are sent under (their ``seq`` is per stream)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (STREAM_META_KEY,)).fetchone()
    return None if row is None else str(row[0])


def peek(
    conn: sqlite3.Connection, *, after_seq: int = 0, max_count: int, max_bytes: int
) -> list[Entry]:
    """The oldest pending entries after ``after_seq``, in ``seq`` order, within the limits.

    The first entry is always returned even if it alone exceeds ``max_bytes``: a big
    envelope must still travel (the remote may answer 413, and then it is dead-lettered).
    """
    rows = conn.execute(
        "SELECT o.seq, o.bytes, e.event_id, e.body FROM outbox AS o"
        " JOIN events AS e ON e.seq = o.seq WHERE o.seq > ? ORDER BY o.seq LIMIT ?",
        (after_seq, max_count),
    )
    entries: list[Entry] = []
    total = 0
    for seq, size, event_id, body in rows:
        total += int(size)
        if entries and total > max_bytes:
            break
        entries.append(Entry(int(seq), str(event_id), str(body)))
    return entries


@dataclass(frozen=True, slots=True)
class Backlog:
    """What waits in the outbox behind a batch: how many entries, and when the oldest of
    them was stored (None when there is none)."""

    count: int
    oldest_at: str | None


def backlog_after(conn: sqlite3.Connection, seq: int) -> Backlog:
    """The entries pending after ``seq``, from the maintained count minus the few entries at
    or before it (the batch in flight and the one just read), so the cost does not grow
    with the backlog."""
    row = conn.execute(
        "SELECT (SELECT pending FROM outbox_state WHERE id = 1)"
        " - (SELECT count(*) FROM outbox WHERE seq <= ?1),"
        " (SELECT e.received_at FROM events AS e"
        "  WHERE e.seq = (SELECT min(seq) FROM outbox WHERE seq > ?1))",
        (seq,),
    ).fetchone()
    return Backlog(max(0, int(row[0])), None if row[1] is None else str(row[1]))


def _delete(conn: sqlite3.Connection, seqs: Sequence[int]) -> int:
    cursor = conn.executemany("DELETE FROM outbox WHERE seq = ?", ((seq,) for seq in seqs))
    return max(0, cursor.rowcount)


def ack(conn: sqlite3.Connection, seqs: Sequence[int], *, at: str | None = None) -> int:
    """Mark entries delivered (the remote answered 2xx for them); returns how many were pending.

    Entries no longer pending (acknowledged twice, or dropped meanwhile) are not counted again.
    """
    with transaction(conn):
        removed = _delete(conn, seqs)
        conn.execute(
            "UPDATE outbox_state SET delivered = delivered + ?, batches_sent = batches_sent + 1,"
            " last_success_at = ? WHERE id = 1",
            (removed, at or utc_timestamp()),
        )
    return removed


def dead_letter(
    conn: sqlite3.Connection,
    seqs: Sequence[int],
    *,
    status: int | None,
    reason: str,
    at: str | None = None,
) -> int:
    """Move entries the remote refused for good to ``outbox_dead``; returns how many moved."""
    when = at or utc_timestamp()
    with transaction(conn):
        removed = 0
        for seq in seqs:
            if conn.execute("DELETE FROM outbox WHERE seq = ?", (seq,)).rowcount:
                conn.execute(
                    "INSERT INTO outbox_dead (seq, status, reason, dead_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (seq) DO UPDATE SET status = excluded.status,"
                    " reason = excluded.reason, dead_at = excluded.dead_at",
                    (seq, status, reason[:_ERROR_LIMIT], when),
                )
                removed += 1
        conn.execute(
            "UPDATE outbox_state SET dead_lettered = dead_lettered + ?, last_error = ?,"
            " last_error_at = ? WHERE id = 1",
            (removed, reason[:_ERROR_LIMIT], when),
        )
    return removed


def requeue_dead(conn: sqlite3.Connection, seqs: Collection[int] | None = None) -> int:
    """Put dead letters back into the outbox (e.g. after fixing a token); returns how many.

    Every dead letter, or only those whose ``seq`` is in ``seqs`` (other numbers are
    ignored). They count in ``pending`` and ``pending_bytes`` and the disk budget applies
    to them as to new entries; ``dead_lettered`` keeps counting every refusal ever made
    and is not lowered.
    """
    chosen = (_seq_array(seqs),)
    with transaction(conn):
        cursor = conn.execute(
            "INSERT INTO outbox (seq, bytes) SELECT d.seq, length(CAST(e.body AS BLOB))"
            " FROM outbox_dead AS d JOIN events AS e ON e.seq = d.seq"
            " WHERE ?1 IS NULL OR d.seq IN (SELECT value FROM json_each(?1))"
            " ORDER BY d.seq ON CONFLICT DO NOTHING",
            chosen,
        )
        moved = cursor.rowcount
        conn.execute(
            "DELETE FROM outbox_dead WHERE ?1 IS NULL OR seq IN (SELECT value FROM json_each(?1))",
            chosen,
        )
        if moved:
            recount(conn)
            apply_budget(conn)
    return moved


def record_failure(conn: sqlite3.Connection, message: str, *, at: str | None = None) -> None:
    """Remember a failed attempt (nothing leaves the outbox)."""
    with transaction(conn):
        conn.execute(
            "UPDATE outbox_state SET failed_attempts = failed_attempts + 1, last_error = ?,"
            " last_error_at = ? WHERE id = 1",
            (message[:_ERROR_LIMIT], at or utc_timestamp()),
        )


def trim_to_budget(conn: sqlite3.Connection) -> int:
    """Apply the overflow policy now (after the budget changed); returns how many dropped."""
    with transaction(conn):
        return apply_budget(conn)


def add_quarantined(conn: sqlite3.Connection, count: int) -> None:
    """Count envelopes lost to a damaged store file (see :mod:`mplp_lsp.store.salvage`)."""
    with transaction(conn):
        conn.execute("UPDATE outbox_state SET quarantined = quarantined + ? WHERE id = 1", (count,))


def read_state(conn: sqlite3.Connection) -> OutboxState:
    row = conn.execute(
        "SELECT enabled, budget_bytes, pending, pending_bytes, delivered, dead_lettered,"
        " overflow_dropped, quarantined, batches_sent, failed_attempts, last_success_at,"
        " last_error, last_error_at FROM outbox_state WHERE id = 1"
    ).fetchone()
    oldest = conn.execute(
        "SELECT e.received_at FROM events AS e WHERE e.seq = (SELECT min(seq) FROM outbox)"
    ).fetchone()
    (dead,) = conn.execute("SELECT count(*) FROM outbox_dead").fetchone()
    return OutboxState(
        enabled=bool(row[0]),
        budget_bytes=int(row[1]),
        pending=int(row[2]),
        pending_bytes=int(row[3]),
        delivered=int(row[4]),
        dead_lettered=int(row[5]),
        dead_letters=int(dead),
        overflow_dropped=int(row[6]),
        quarantined=int(row[7]),
        batches_sent=int(row[8]),
        failed_attempts=int(row[9]),
        last_success_at=row[10],
        last_error=row[11],
        last_error_at=row[12],
        oldest_pending_at=None if oldest is None else str(oldest[0]),
        queued_for=queue_remote(conn),
        held=held_counts(conn),
    )


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An envelope the remote refused for good: its event and the refusal."""

    seq: int
    event_id: str
    kind: str
    status: int | None  # the HTTP status; None if no status was recorded
    reason: str
    dead_at: str


def dead_letters(
    conn: sqlite3.Connection, *, seqs: Collection[int] | None = None, limit: int | None = None
) -> list[DeadLetter]:
    """The dead letters in ``seq`` order (the order their events were accepted).

    Only those whose ``seq`` is in ``seqs`` when given; at most ``limit``.
    """
    rows = conn.execute(
        "SELECT d.seq, e.event_id, e.kind, d.status, d.reason, d.dead_at FROM outbox_dead AS d"
        " JOIN events AS e ON e.seq = d.seq"
        " WHERE ?1 IS NULL OR d.seq IN (SELECT value FROM json_each(?1)) ORDER BY d.seq LIMIT ?2",
        (_seq_array(seqs), -1 if limit is None else limit),  # a negative LIMIT: no limit
    )
    return [
        DeadLetter(int(seq), str(event_id), str(kind), status, str(reason), str(dead_at))
        for seq, event_id, kind, status, reason, dead_at in rows
    ]


def requeue_chosen(conn: sqlite3.Connection, seqs: Collection[int] | None) -> tuple[int, list[int]]:
    """:func:`requeue_dead` of the chosen dead letters (every one for None), in one
    transaction with finding which of ``seqs`` are not dead letters: (moved, those others)."""
    with transaction(conn):
        if seqs is None:
            return requeue_dead(conn), []
        known = {letter.seq for letter in dead_letters(conn, seqs=seqs)}
        return requeue_dead(conn, known), sorted(set(seqs) - known)


def _seq_array(seqs: Collection[int] | None) -> str | None:
    """The ``?1`` of the dead-letter queries: NULL chooses all, else a JSON array of seqs
    (one bound parameter holds any number of them)."""
    return None if seqs is None else json.dumps(sorted(set(seqs)))

"""The outbox and its sinks (``outbox_sinks``, :mod:`mplp_lsp.store.queueing`), synchronously.

One outbox serves every sink: a sink's pending entries are its rows of ``outbox`` and, while
it is enabled, the events after its cursor. Each sink has its own cursor, counters, retry
record and dead letters, so the collector and an OTLP endpoint each get every envelope once,
at their own pace, and one refusing does not hold the other back.

Every function takes a connection and is meant to run on the store's writer thread
(``StoreWriter.run`` for writes, ``StoreWriter.read`` for reads). Events are queued by the
event log's append inside the intake's own transaction (:mod:`mplp_lsp.store.queueing`), so
nothing here enqueues new events; this module reads entries with their bodies, and takes
them out of a sink's queue as delivered, dead-lettered or dropped, each counted in the
sink's row in the same transaction.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

from mplp_lsp.forward.held import held_counts
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import transaction
from mplp_lsp.store.queueing import (
    BODY_BYTES,
    COLLECTOR,
    STREAM_KEY_META_KEY,
    STREAM_META_KEY,
    advance_cursor,
    apply_budget,
    recount,
)

__all__ = [
    "COLLECTOR",
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
    "enable",
    "ensure_sink",
    "peek",
    "read_state",
    "record_failure",
    "requeue_chosen",
    "requeue_dead",
    "requeue_named",
    "sink_id",
    "sink_names",
    "state_of",
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
    """One sink's queue and counters, with what is store-wide (held, quarantined)."""

    sink: str
    enabled: bool
    budget_bytes: int
    pending: int
    pending_bytes: int
    delivered: int
    dead_lettered: int  # refusals ever made (an envelope refused again counts again)
    dead_letters: int  # this sink's envelopes in the dead-letter table now
    rejected: int  # acknowledged in a batch the receiver took only in part
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


def sink_id(conn: sqlite3.Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM outbox_sinks WHERE name = ?", (name,)).fetchone()
    return None if row is None else int(row[0])


def sink_names(conn: sqlite3.Connection) -> list[str]:
    """Every sink this store ever queued for, the collector first."""
    return [str(name) for (name,) in conn.execute("SELECT name FROM outbox_sinks ORDER BY id")]


def ensure_sink(conn: sqlite3.Connection, name: str) -> int:
    """The id of the sink ``name``, made (not yet queuing) if the store has none."""
    with transaction(conn):
        conn.execute(
            "INSERT INTO outbox_sinks (name) VALUES (?) ON CONFLICT (name) DO NOTHING", (name,)
        )
        found = sink_id(conn, name)
    assert found is not None
    return found


def enable(conn: sqlite3.Connection, sink: int, *, budget_bytes: int) -> tuple[str, str]:
    """Start queuing accepted events for ``sink`` (from this commit on); the stream id and
    its write key.

    Queuing stays on for the sink: a later run without it configured keeps queuing, so
    nothing accepted in between is missed (docs/forwarding.md). The key is made with the
    stream (a store forwarding before keys existed gets one now); the remote binds the
    stream to the first key it sees, so no other store can write into it.
    """
    if budget_bytes < 1:
        raise ValueError(f"budget_bytes must be >= 1, got {budget_bytes}")
    with transaction(conn):
        conn.execute(
            "UPDATE outbox_sinks SET budget_bytes = ?1, cursor = CASE WHEN enabled THEN cursor"
            " ELSE (SELECT coalesce(max(seq), 0) FROM events) END, enabled = 1 WHERE id = ?2",
            (budget_bytes, sink),
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


def stream_id(conn: sqlite3.Connection) -> str | None:
    """The id this store's envelopes are sent under (their ``seq`` is per stream)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (STREAM_META_KEY,)).fetchone()
    return None if row is None else str(row[0])


def _cursor(conn: sqlite3.Connection, sink: int) -> tuple[int, bool]:
    row = conn.execute("SELECT cursor, enabled FROM outbox_sinks WHERE id = ?", (sink,)).fetchone()
    if row is None:
        raise LookupError(f"no forwarding sink {sink} in this store")
    return int(row[0]), bool(row[1])


def peek(
    conn: sqlite3.Connection, sink: int, *, after_seq: int = 0, max_count: int, max_bytes: int
) -> list[Entry]:
    """The oldest pending entries of ``sink`` after ``after_seq``, in ``seq`` order, within
    the limits: its rows, then the events after its cursor.

    The first entry is always returned even if it alone exceeds ``max_bytes``: a big
    envelope must still travel (the remote may answer 413, and then it is dead-lettered).
    """
    cursor, enabled = _cursor(conn, sink)
    rows = conn.execute(
        "SELECT o.seq, o.bytes, e.event_id, e.body FROM outbox AS o"
        " JOIN events AS e ON e.seq = o.seq WHERE o.sink = ? AND o.seq > ?"
        " ORDER BY o.seq LIMIT ?",
        (sink, after_seq, max_count),
    ).fetchall()
    if enabled and len(rows) < max_count:
        rows += conn.execute(
            f"SELECT seq, {BODY_BYTES}, event_id, body FROM events"  # noqa: S608
            " WHERE seq > ? ORDER BY seq LIMIT ?",
            (max(cursor, after_seq), max_count - len(rows)),
        ).fetchall()
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


def backlog_after(conn: sqlite3.Connection, sink: int, seq: int) -> Backlog:
    """The entries of ``sink`` pending after ``seq``: the maintained count minus the few
    entries at or before it (the batch in flight and the one just read), so the cost does
    not grow with the backlog."""
    cursor, enabled = _cursor(conn, sink)
    tail_from = cursor if enabled else seq  # a disabled sink has no events pending
    row = conn.execute(
        "SELECT (SELECT pending FROM outbox_sinks WHERE id = ?1)"
        " - (SELECT count(*) FROM outbox WHERE sink = ?1 AND seq <= ?2)"
        " - (SELECT count(*) FROM events WHERE seq > ?3 AND seq <= ?2),"
        " coalesce((SELECT min(seq) FROM outbox WHERE sink = ?1 AND seq > ?2),"
        "  (SELECT min(seq) FROM events WHERE seq > max(?2, ?3) AND ?4))",
        (sink, seq, tail_from, enabled),
    ).fetchone()
    oldest = None
    if row[1] is not None:
        (oldest,) = conn.execute(
            "SELECT received_at FROM events WHERE seq = ?", (row[1],)
        ).fetchone()
    return Backlog(max(0, int(row[0])), None if oldest is None else str(oldest))


def _take(conn: sqlite3.Connection, sink: int, seqs: Sequence[int]) -> list[int]:
    """Take ``seqs`` out of ``sink``'s queue (its rows, or the events right after its
    cursor, which moves past them); returns those that were pending. Counted here."""
    chosen = json.dumps(sorted(set(seqs)))
    cursor, enabled = _cursor(conn, sink)
    rows = conn.execute(
        "SELECT seq, bytes FROM outbox WHERE sink = ?1"
        " AND seq IN (SELECT value FROM json_each(?2))",
        (sink, chosen),
    ).fetchall()
    conn.execute(
        "DELETE FROM outbox WHERE sink = ?1 AND seq IN (SELECT value FROM json_each(?2))",
        (sink, chosen),
    )
    if enabled:
        tail = conn.execute(
            f"SELECT seq, {BODY_BYTES} FROM events WHERE seq > ?1"  # noqa: S608
            " AND seq IN (SELECT value FROM json_each(?2))",
            (cursor, chosen),
        ).fetchall()
        if tail:
            advance_cursor(conn, sink, max(seq for seq, _ in tail), keep=chosen)
            rows += tail
    conn.execute(
        "UPDATE outbox_sinks SET pending = pending - ?, pending_bytes = pending_bytes - ?"
        " WHERE id = ?",
        (len(rows), sum(int(size) for _, size in rows), sink),
    )
    return sorted(int(seq) for seq, _ in rows)


def ack(
    conn: sqlite3.Connection,
    sink: int,
    seqs: Sequence[int],
    *,
    rejected: int = 0,
    at: str | None = None,
) -> int:
    """Mark entries delivered (the remote answered 2xx for them); returns how many were
    pending. ``rejected``: how many of them the receiver said it refused without saying
    which (an OTLP partial success).

    Entries no longer pending (acknowledged twice, or dropped meanwhile) are not counted again.
    """
    with transaction(conn):
        removed = len(_take(conn, sink, seqs))
        conn.execute(
            "UPDATE outbox_sinks SET delivered = delivered + ?, rejected = rejected + ?,"
            " batches_sent = batches_sent + 1, last_success_at = ? WHERE id = ?",
            (removed, min(rejected, removed), at or utc_timestamp(), sink),
        )
    return removed


def dead_letter(
    conn: sqlite3.Connection,
    sink: int,
    seqs: Sequence[int],
    *,
    status: int | None,
    reason: str,
    at: str | None = None,
) -> int:
    """Move entries the remote refused for good to ``outbox_dead``; returns how many moved."""
    when = at or utc_timestamp()
    with transaction(conn):
        taken = _take(conn, sink, seqs)
        conn.executemany(
            "INSERT INTO outbox_dead (sink, seq, status, reason, dead_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (sink, seq) DO UPDATE SET status = excluded.status,"
            " reason = excluded.reason, dead_at = excluded.dead_at",
            ((sink, seq, status, reason[:_ERROR_LIMIT], when) for seq in taken),
        )
        conn.execute(
            "UPDATE outbox_sinks SET dead_lettered = dead_lettered + ?, last_error = ?,"
            " last_error_at = ? WHERE id = ?",
            (len(taken), reason[:_ERROR_LIMIT], when, sink),
        )
    return len(taken)


def requeue_dead(
    conn: sqlite3.Connection, seqs: Collection[int] | None = None, *, sink: int | None = None
) -> int:
    """Put dead letters back into their sinks' queues (e.g. after fixing a token); returns
    how many.

    Every dead letter, or only those whose ``seq`` is in ``seqs`` (other numbers are
    ignored), of ``sink`` or of every sink. They count in ``pending`` and ``pending_bytes``
    and the disk budget applies to them as to new entries; ``dead_lettered`` keeps counting
    every refusal ever made and is not lowered.
    """
    chosen = (_seq_array(seqs), sink)
    with transaction(conn):
        cursor = conn.execute(
            f"INSERT INTO outbox (sink, seq, bytes) SELECT d.sink, d.seq, {BODY_BYTES}"  # noqa: S608
            " FROM outbox_dead AS d JOIN events AS e ON e.seq = d.seq"
            " WHERE (?1 IS NULL OR d.seq IN (SELECT value FROM json_each(?1)))"
            " AND (?2 IS NULL OR d.sink = ?2) ORDER BY d.sink, d.seq ON CONFLICT DO NOTHING",
            chosen,
        )
        moved = cursor.rowcount
        conn.execute(
            "DELETE FROM outbox_dead WHERE (?1 IS NULL OR seq IN (SELECT value FROM json_each(?1)))"
            " AND (?2 IS NULL OR sink = ?2)",
            chosen,
        )
        if moved:
            recount(conn, sink)
            apply_budget(conn)
    return moved


def record_failure(
    conn: sqlite3.Connection, sink: int, message: str, *, at: str | None = None
) -> None:
    """Remember a failed attempt (nothing leaves the outbox)."""
    with transaction(conn):
        conn.execute(
            "UPDATE outbox_sinks SET failed_attempts = failed_attempts + 1, last_error = ?,"
            " last_error_at = ? WHERE id = ?",
            (message[:_ERROR_LIMIT], at or utc_timestamp(), sink),
        )


def trim_to_budget(conn: sqlite3.Connection) -> int:
    """Apply the overflow policy now (after a budget changed); returns how many dropped."""
    with transaction(conn):
        return apply_budget(conn)


def add_quarantined(conn: sqlite3.Connection, count: int) -> None:
    """Count envelopes lost to a damaged store file (see :mod:`mplp_lsp.store.salvage`)."""
    with transaction(conn):
        conn.execute(
            "UPDATE outbox_totals SET quarantined = quarantined + ? WHERE id = 1", (count,)
        )


def read_state(conn: sqlite3.Connection, sink: int) -> OutboxState:
    row = conn.execute(
        "SELECT name, enabled, budget_bytes, pending, pending_bytes, delivered, dead_lettered,"
        " rejected, overflow_dropped, batches_sent, failed_attempts, last_success_at,"
        " last_error, last_error_at, remote, cursor FROM outbox_sinks WHERE id = ?",
        (sink,),
    ).fetchone()
    if row is None:
        raise LookupError(f"no forwarding sink {sink} in this store")
    enabled, cursor = bool(row[1]), int(row[15])
    oldest = conn.execute(
        "SELECT received_at FROM events WHERE seq = coalesce("
        " (SELECT min(seq) FROM outbox WHERE sink = ?1),"
        " (SELECT min(seq) FROM events WHERE seq > ?2 AND ?3))",
        (sink, cursor, enabled),
    ).fetchone()
    (dead,) = conn.execute("SELECT count(*) FROM outbox_dead WHERE sink = ?", (sink,)).fetchone()
    (quarantined,) = conn.execute("SELECT quarantined FROM outbox_totals WHERE id = 1").fetchone()
    return OutboxState(
        sink=str(row[0]),
        enabled=enabled,
        budget_bytes=int(row[2]),
        pending=int(row[3]),
        pending_bytes=int(row[4]),
        delivered=int(row[5]),
        dead_lettered=int(row[6]),
        dead_letters=int(dead),
        rejected=int(row[7]),
        overflow_dropped=int(row[8]),
        quarantined=int(quarantined),
        batches_sent=int(row[9]),
        failed_attempts=int(row[10]),
        last_success_at=row[11],
        last_error=row[12],
        last_error_at=row[13],
        oldest_pending_at=None if oldest is None else str(oldest[0]),
        queued_for=None if row[14] is None else str(row[14]),
        held=held_counts(conn),
    )


def state_of(conn: sqlite3.Connection, name: str) -> OutboxState | None:
    """:func:`read_state` of the sink ``name``; None when the store has no such sink."""
    found = sink_id(conn, name)
    return None if found is None else read_state(conn, found)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An envelope a sink's remote refused for good: its event and the refusal."""

    seq: int
    event_id: str
    kind: str
    status: int | None  # the HTTP status; None if no status was recorded
    reason: str
    dead_at: str
    sink: str = COLLECTOR


def dead_letters(
    conn: sqlite3.Connection,
    *,
    seqs: Collection[int] | None = None,
    limit: int | None = None,
    sink: int | None = None,
) -> list[DeadLetter]:
    """The dead letters in ``seq`` order (the order their events were accepted), then by sink.

    Only those whose ``seq`` is in ``seqs`` when given, of ``sink`` when given; at most
    ``limit``.
    """
    rows = conn.execute(
        "SELECT d.seq, e.event_id, e.kind, d.status, d.reason, d.dead_at, s.name"
        " FROM outbox_dead AS d JOIN events AS e ON e.seq = d.seq"
        " JOIN outbox_sinks AS s ON s.id = d.sink"
        " WHERE (?1 IS NULL OR d.seq IN (SELECT value FROM json_each(?1)))"
        " AND (?3 IS NULL OR d.sink = ?3) ORDER BY d.seq, d.sink LIMIT ?2",
        (_seq_array(seqs), -1 if limit is None else limit, sink),  # a negative LIMIT: none
    )
    return [
        DeadLetter(int(seq), str(event_id), str(kind), status, str(reason), str(at), str(name))
        for seq, event_id, kind, status, reason, at, name in rows
    ]


def requeue_chosen(
    conn: sqlite3.Connection, seqs: Collection[int] | None, *, sink: int | None = None
) -> tuple[int, list[int]]:
    """:func:`requeue_dead` of the chosen dead letters (every one for None), in one
    transaction with finding which of ``seqs`` are not dead letters: (moved, those others)."""
    with transaction(conn):
        if seqs is None:
            return requeue_dead(conn, sink=sink), []
        known = {letter.seq for letter in dead_letters(conn, seqs=seqs, sink=sink)}
        return requeue_dead(conn, known, sink=sink), sorted(set(seqs) - known)


def requeue_named(
    conn: sqlite3.Connection, seqs: Collection[int] | None, *, sink: str | None = None
) -> tuple[int, list[int]]:
    """:func:`requeue_chosen` for the sink named ``sink`` (every sink for None); a name the
    store has no sink for has no dead letters."""
    if sink is None:
        return requeue_chosen(conn, seqs)
    found = sink_id(conn, sink)
    if found is None:
        return 0, sorted(set(seqs or ()))
    return requeue_chosen(conn, seqs, sink=found)


def _seq_array(seqs: Collection[int] | None) -> str | None:
    """The ``?1`` of the dead-letter queries: NULL chooses all, else a JSON array of seqs
    (one bound parameter holds any number of them)."""
    return None if seqs is None else json.dumps(sorted(set(seqs)))

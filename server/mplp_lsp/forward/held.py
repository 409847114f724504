"""Envelopes held for a remote that is not the one configured now (docs/forwarding.md).

Each sink's queue is the queue of one remote: the one named in its row (``outbox_sinks.remote``,
a normalised URL without credentials, :func:`mplp_lsp.forward.remote.remote_identity`). When
a sink starts with another remote, :func:`claim` moves the sink's pending entries to
``outbox_held`` under the remote they were queued for, and puts back the entries held for
the new remote: a remote never sends what was queued for another, and nothing is dropped.
A sink whose queue names no remote (queued before remotes were recorded) gives its queue to
the first remote that claims it.

Held entries are not pending (not sent, not under the disk budget) and retention keeps
their events. They leave only by a claim of their remote, or by the user's choice
(``mplp-lsp outbox requeue --held``, ``outbox drop --held``). Their count per remote is
kept in ``meta`` by every function that changes the table, so status reads one row.

Every function runs on the store's writer thread, in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import transaction
from mplp_lsp.store.queueing import (
    BODY_BYTES,
    HELD_META_KEY,
    apply_budget,
    recount,
    recount_held,
)

__all__ = [
    "HeldGroup",
    "Switch",
    "claim",
    "drop_held",
    "held_counts",
    "held_groups",
    "queue_remote",
    "requeue_held",
]


@dataclass(frozen=True, slots=True)
class Switch:
    """What :func:`claim` did: the remote the queue was for, how many of its entries were
    held for it, and how many held for the claiming remote came back into the queue."""

    previous: str | None
    held: int
    released: int


def queue_remote(conn: sqlite3.Connection, sink: int) -> str | None:
    """The remote ``sink``'s entries were queued for (None: not yet known)."""
    row = conn.execute("SELECT remote FROM outbox_sinks WHERE id = ?", (sink,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def claim(conn: sqlite3.Connection, sink: int, remote: str, *, at: str | None = None) -> Switch:
    """Make ``sink``'s queue ``remote``'s: hold another remote's entries, release its own."""
    with transaction(conn):
        previous = queue_remote(conn, sink)
        if previous == remote:
            return Switch(previous, 0, 0)
        held = 0
        if previous is not None:
            when = at or utc_timestamp()
            held = conn.execute(
                "INSERT INTO outbox_held (remote, seq, bytes, held_at)"  # noqa: S608 (a constant)
                " SELECT ?2, seq, bytes, ?3 FROM outbox WHERE sink = ?1"
                f" UNION ALL SELECT ?2, seq, {BODY_BYTES}, ?3 FROM events"
                "  WHERE seq > (SELECT cursor FROM outbox_sinks WHERE id = ?1 AND enabled)"
                " ORDER BY seq ON CONFLICT DO NOTHING",
                (sink, previous, when),
            ).rowcount
            conn.execute("DELETE FROM outbox WHERE sink = ?", (sink,))
            conn.execute(
                "UPDATE outbox_sinks SET cursor = (SELECT coalesce(max(seq), 0) FROM events)"
                " WHERE id = ? AND enabled",
                (sink,),
            )
        conn.execute("UPDATE outbox_sinks SET remote = ? WHERE id = ?", (remote, sink))
        released = _release(conn, sink, remote)
        recount_held(conn)
    return Switch(previous, held, released)


def _release(conn: sqlite3.Connection, sink: int, remote: str | None) -> int:
    """Move the entries held for ``remote`` (every one for None) into ``sink``'s queue; one
    already pending for it (after its cursor) stays there once."""
    moved = conn.execute(
        "INSERT INTO outbox (sink, seq, bytes) SELECT ?1, seq, bytes FROM outbox_held"
        " WHERE (?2 IS NULL OR remote = ?2)"
        " AND (SELECT seq <= cursor OR NOT enabled FROM outbox_sinks WHERE id = ?1)"
        " ORDER BY seq ON CONFLICT DO NOTHING",
        (sink, remote),
    ).rowcount
    conn.execute("DELETE FROM outbox_held WHERE ?1 IS NULL OR remote = ?1", (remote,))
    recount(conn, sink)
    if moved:
        apply_budget(conn)  # back in a queue, they are under its budget like any entry
    return moved


def requeue_held(conn: sqlite3.Connection, sink: int, remote: str | None) -> int:
    """The user's choice: send the entries held for ``remote`` (all for None) to the remote
    ``sink`` is for now; returns how many moved."""
    with transaction(conn):
        moved = _release(conn, sink, remote)
        recount_held(conn)
    return moved


def drop_held(conn: sqlite3.Connection, remote: str | None) -> int:
    """The user's choice: forget the entries held for ``remote`` (all for None); their
    events stay in the local log. Returns how many."""
    with transaction(conn):
        dropped = conn.execute(
            "DELETE FROM outbox_held WHERE ?1 IS NULL OR remote = ?1", (remote,)
        ).rowcount
        recount_held(conn)
    return dropped


def held_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Entries held per remote, as last recorded (one row read)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (HELD_META_KEY,)).fetchone()
    if row is None:
        return {}
    counts = json.loads(row[0])
    return {str(remote): int(count) for remote, count in counts.items()}


@dataclass(frozen=True, slots=True)
class HeldGroup:
    """The entries held for one remote: how many, their size, and when the oldest of their
    events was stored and when they were held."""

    remote: str
    count: int
    bytes: int
    oldest_at: str
    held_at: str


def held_groups(conn: sqlite3.Connection, remote: str | None = None) -> list[HeldGroup]:
    """The held entries per remote (only ``remote``'s when given), by remote."""
    rows = conn.execute(
        "SELECT h.remote, count(*), sum(h.bytes), min(h.seq), min(h.held_at)"
        " FROM outbox_held AS h WHERE ?1 IS NULL OR h.remote = ?1"
        " GROUP BY h.remote ORDER BY h.remote",
        (remote,),
    ).fetchall()
    groups = []
    for name, count, size, first, held_at in rows:
        stored = conn.execute("SELECT received_at FROM events WHERE seq = ?", (first,)).fetchone()
        oldest = held_at if stored is None else stored[0]  # retention keeps it; salvage may not
        groups.append(HeldGroup(str(name), int(count), int(size), str(oldest), str(held_at)))
    return groups

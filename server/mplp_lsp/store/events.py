"""The event log: accepted envelopes, counters and metadata in the workspace database.

:class:`EventLog` is a thin synchronous layer over one connection. It never decides
*when* to commit beyond its own single-statement helpers: :meth:`EventLog.append` runs in
one transaction (or joins the caller's), and asynchronous callers go through
:class:`~mplp_lsp.store.writer.StoreWriter`, which owns the connection and its thread.

Duplicates are decided by the database, not by an in-memory set: ``event_id`` and
``dedup_key`` are both ``UNIQUE`` and rows are inserted with ``ON CONFLICT DO NOTHING``, so
a duplicate is recognised across restarts, across processes and within one batch alike.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import dedup_param, transaction

__all__ = [
    "EventLog",
    "NewEvent",
    "PreparedEvent",
    "StoredEvent",
    "canonical_timestamp",
    "encode_body",
    "prepare_events",
]


@dataclass(frozen=True, slots=True)
class NewEvent:
    """What the intake hands over: a validated envelope and the keys it is stored under."""

    event_id: str
    kind: str
    dedup_key: str
    timestamp: str
    envelope: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row of the event log. ``seq`` orders events in commit order."""

    seq: int
    event_id: str
    kind: str
    timestamp: str
    received_at: str
    envelope: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """A :class:`NewEvent` with its body serialised and its timestamp canonical.

    Preparing is the part of an append that can fail on one caller's data alone (an
    envelope that is not JSON, a timestamp that is not a date), so the writer does it per
    caller before the shared transaction starts.
    """

    event: NewEvent
    timestamp: str
    body: str

    def row(self, received_at: str) -> tuple[str, str, str | bytes, str, str, str]:
        event = self.event
        key = dedup_param(event.dedup_key)
        return (event.event_id, event.kind, key, self.timestamp, received_at, self.body)


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_body(envelope: Mapping[str, Any]) -> str:
    """Compact JSON, non-ASCII kept as is (smaller rows, readable with the sqlite3 shell).

    NaN and infinities are refused: they would make the body invalid JSON for consumers.
    """
    return _ENCODER.encode(envelope)


_CANONICAL_LENGTH: Final = len("2025-01-01T00:00:00.000Z")


def canonical_timestamp(value: str) -> str:
    """``value`` as UTC with milliseconds and ``Z``: the one form stored in ``timestamp``.

    Stored timestamps are compared as strings (``since`` and the index), which orders them
    correctly only if they all have the same shape: ``...:00Z`` sorts after ``...:00.500Z``
    and ``+02:00`` offsets do not sort at all. Envelopes from outside may use any RFC 3339
    form, so the column gets the canonical one (the envelope body keeps the original).
    A timestamp without an offset is taken as UTC.
    """
    if (
        len(value) == _CANONICAL_LENGTH
        and value[-1] == "Z"
        and value[10] == "T"
        and value[19] == "."
    ):
        return value
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return utc_timestamp(moment)


def prepare_events(events: Sequence[NewEvent]) -> list[PreparedEvent]:
    """Serialise ``events``; raises (``TypeError``/``ValueError``) on the first bad one."""
    return [
        PreparedEvent(event, canonical_timestamp(event.timestamp), encode_body(event.envelope))
        for event in events
    ]


_INSERT: Final = (
    "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_SELECT: Final = "SELECT seq, event_id, kind, timestamp, received_at, body FROM events"


class EventLog:
    """Event log, counters and metadata on one connection (used on that connection's thread)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def append(self, events: Sequence[NewEvent]) -> list[StoredEvent | None]:
        """Store ``events`` in one transaction; ``None`` marks each duplicate.

        A duplicate has the ``dedup_key`` or the ``event_id`` of an event already stored,
        including one earlier in the same batch. If the connection is already in a
        transaction the rows join it and become durable with its ``COMMIT``.
        """
        prepared = prepare_events(events)
        with transaction(self._conn):
            return self.append_prepared(prepared)

    def append_prepared(
        self, prepared: Sequence[PreparedEvent], *, received_at: str | None = None
    ) -> list[StoredEvent | None]:
        """Insert already prepared events inside the caller's open transaction."""
        if not self._conn.in_transaction:
            raise RuntimeError("append_prepared() needs an open transaction")
        received = received_at or utc_timestamp()
        # A statement per row gives each row its own outcome. executemany plus a read-back
        # was measured too: no faster on a file database, where the index updates dominate.
        cursor = self._conn.cursor()
        results: list[StoredEvent | None] = []
        for item in prepared:
            cursor.execute(_INSERT, item.row(received))
            if cursor.rowcount != 1:  # ON CONFLICT DO NOTHING: a duplicate
                results.append(None)
                continue
            event = item.event
            seq = cursor.lastrowid
            assert seq is not None  # set by every INSERT that added a row
            # The caller's mapping, shallow-copied: re-parsing the body would cost as much as
            # writing it. It equals what query() returns for JSON-native envelopes.
            results.append(
                StoredEvent(
                    seq, event.event_id, event.kind, item.timestamp, received, dict(event.envelope)
                )
            )
        return results

    def query(
        self,
        *,
        kinds: Collection[str] | None = None,
        since: str | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Stored events in ``seq`` order.

        ``kinds`` keeps only those kinds; ``since`` keeps events whose timestamp is at or
        after it (any ISO 8601 form; compared in canonical UTC); ``after_seq`` keeps
        ``seq > after_seq`` (the resume cursor); ``limit`` caps the number of rows.
        """
        if isinstance(kinds, str):
            raise TypeError("kinds must be a collection of kinds, not one string")
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        clauses: list[str] = []
        params: list[Any] = []
        if kinds is not None:
            wanted = sorted(set(kinds))
            if not wanted:
                return []
            clauses.append(f"kind IN ({','.join('?' * len(wanted))})")
            params.extend(wanted)
        if since is not None:
            clauses.append("timestamp >= ?")
            params.append(canonical_timestamp(since))
        if after_seq is not None:
            clauses.append("seq > ?")
            params.append(after_seq)
        # Only constant SQL fragments are joined here; every value is a bound parameter.
        sql = _SELECT
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_stored(row) for row in self._conn.execute(sql, params)]

    def counts_by_kind(self) -> dict[str, int]:
        rows = self._conn.execute("SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind")
        return {str(kind): int(count) for kind, count in rows}

    def last_event(self) -> StoredEvent | None:
        row = self._conn.execute(_SELECT + " ORDER BY seq DESC LIMIT 1")
        found = row.fetchone()
        return None if found is None else _stored(found)

    def bump(self, name: str, by: int = 1) -> None:
        """Add ``by`` to counter ``name`` (created at 0), in the open transaction or its own."""
        with transaction(self._conn):
            self._conn.execute(
                "INSERT INTO counters (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
                (name, by),
            )

    def counters(self) -> dict[str, int]:
        rows = self._conn.execute("SELECT name, value FROM counters ORDER BY name")
        return {str(name): int(value) for name, value in rows}

    def get_meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set ``key`` to ``value``, in the open transaction or its own."""
        with transaction(self._conn):
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )


def _stored(row: tuple[Any, ...]) -> StoredEvent:
    seq, event_id, kind, timestamp, received_at, body = row
    return StoredEvent(seq, event_id, kind, timestamp, received_at, json.loads(body))

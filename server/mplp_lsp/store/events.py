"""The event log: accepted envelopes, counters and metadata in the workspace database.

:class:`EventLog` is a thin synchronous layer over one connection. It never decides
*when* to commit beyond its own single-statement helpers: :meth:`EventLog.append` runs in
one transaction (or joins the caller's), and asynchronous callers go through
:class:`~mplp_lsp.store.writer.StoreWriter`, which owns the connection and its thread.

Duplicates are decided by the database, not by an in-memory set: ``dedup_key`` and every
received ``event_id`` are ``UNIQUE`` and rows are inserted with ``ON CONFLICT DO NOTHING``,
so a duplicate is recognised across restarts, across processes and within one batch alike.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.json_input import has_utf8_form
from mplp_lsp.store.database import meta_value, transaction
from mplp_lsp.store.dedup import dedup_param
from mplp_lsp.store.queueing import queue_appended

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
    dedup_key: str | bytes
    timestamp: str
    envelope: Mapping[str, Any]
    # True when this daemon minted event_id (a fresh UUID v4): such ids skip the uniqueness
    # check that received ids get (see the events table in mplp_lsp.store.database).
    minted: bool = False
    # The envelope as stored (encode_body), when the intake has encoded it already.
    body: str | None = None


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row of the event log. ``seq`` orders events in commit order."""

    seq: int
    event_id: str
    kind: str
    timestamp: str
    received_at: str
    envelope: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """``{seq, kind, envelope}``: how the API and ``flow run`` hand a stored event on."""
        return {"seq": self.seq, "kind": self.kind, "envelope": self.envelope}


_Row = tuple[str, str, str | bytes, str, str, str, bool]


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

    def row(self, received_at: str) -> _Row:
        event = self.event
        key = dedup_param(event.dedup_key)
        return (
            event.event_id,
            event.kind,
            key,
            self.timestamp,
            received_at,
            self.body,
            event.minted,
        )


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_body(envelope: Mapping[str, Any]) -> str:
    """Compact JSON, non-ASCII kept as is (smaller rows, readable with the sqlite3 shell).

    NaN and infinities are refused: they would make the body invalid JSON for consumers; so
    is text with a lone surrogate, which has no UTF-8 form (SQLite would refuse it with the
    whole transaction). orjson writes the common envelope about 5x faster than ``json`` (it
    was a third of an append's Python time), but it writes NaN as ``null`` and refuses what
    ``json`` takes (integers beyond 64 bits, non-string keys, lone surrogates). Any output
    holding ``null`` and anything orjson refuses go through ``json``, which decides as before.
    orjson is imported at the first event, not at start-up: an idle daemon's memory is kept
    within twice a bare pygls server's (tests/e2e/test_lazy_imports.py).
    """
    import orjson

    try:
        encoded = orjson.dumps(envelope)
    except orjson.JSONEncodeError:
        return _json_body(envelope)
    if b"null" in encoded:
        return _json_body(envelope)
    return encoded.decode()


def _json_body(envelope: Mapping[str, Any]) -> str:
    text = _ENCODER.encode(envelope)
    if not text.isascii() and not has_utf8_form(text):
        raise ValueError("the envelope holds text with a lone surrogate (no UTF-8 form)")
    return text


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
        PreparedEvent(
            event,
            canonical_timestamp(event.timestamp),
            encode_body(event.envelope) if event.body is None else event.body,
        )
        for event in events
    ]


_INSERT: Final = (
    "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body, minted)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_SELECT: Final = "SELECT seq, event_id, kind, timestamp, received_at, body FROM events"


class EventLog:
    """Event log, counters and metadata on one connection (used on that connection's thread)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def append(self, events: Sequence[NewEvent]) -> list[StoredEvent | None]:
        """Store ``events`` in one transaction; ``None`` marks each duplicate.

        A duplicate has the ``dedup_key`` of an event already stored, or a received (not
        minted) ``event_id`` already received, including one earlier in the same batch. If
        the connection is already in a transaction the rows join it and become durable with
        its ``COMMIT``.
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
        rows = [item.row(received) for item in prepared]
        if not rows:
            return []
        conn = self._conn
        last = _last_seq(conn)
        # One executemany costs a third of a statement per row. Rows that are duplicates
        # are skipped by ON CONFLICT DO NOTHING, so the statement itself says only how many
        # were stored, not which.
        inserted = conn.executemany(_INSERT, rows).rowcount
        if inserted:
            queue_appended(conn, last)
        if inserted == len(rows) and _last_seq(conn) == last + inserted:
            # seq is the rowid of an append-only table: SQLite numbers new rows one past the
            # largest, so these rows hold exactly the numbers after ``last``, in order.
            return [
                _accepted(last + offset, item, received)
                for offset, item in enumerate(prepared, start=1)
            ]
        return self._match_stored(prepared, rows, last, inserted, received)

    def _match_stored(
        self,
        prepared: Sequence[PreparedEvent],
        rows: list[_Row],
        last: int,
        inserted: int,
        received: str,
    ) -> list[StoredEvent | None]:
        """Which of ``rows`` the last statement stored: read back what it added, in order.

        The stored rows follow the input's order, so a row was stored exactly when it
        equals the next stored one in id, key and id origin: a skipped row cannot equal a
        later stored one, which would have been skipped for the same reason.
        """
        added = self._conn.execute(
            "SELECT seq, event_id, dedup_key, minted FROM events WHERE seq > ? ORDER BY seq",
            (last,),
        ).fetchall()
        if len(added) != inserted:
            raise RuntimeError(f"expected {inserted} new rows after seq {last}, read {len(added)}")
        results: list[StoredEvent | None] = []
        position = 0
        for item, row in zip(prepared, rows, strict=True):
            if position < len(added) and added[position][1:] == (row[0], row[2], int(row[6])):
                results.append(_accepted(added[position][0], item, received))
                position += 1
            else:
                results.append(None)
        if position != len(added):
            unmatched = len(added) - position
            raise RuntimeError(f"{unmatched} new rows after seq {last} matched no input")
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

        ``kinds`` keeps only those kinds; ``since`` keeps events that occurred at or after
        it (their own time, ``occurred_at``; any ISO 8601 form); ``after_seq`` keeps
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
            clauses.append("occurred_at >= ?")
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
        rows = self._conn.execute(
            "SELECT kind, sum(count) FROM event_counts GROUP BY kind HAVING sum(count) > 0"
            " ORDER BY kind"
        )
        return {str(kind): int(count) for kind, count in rows}

    def received_since(self, day: str) -> int:
        """Events received on ``day`` (``YYYY-MM-DD``, UTC) or later."""
        row = self._conn.execute(
            "SELECT coalesce(sum(count), 0) FROM event_counts WHERE day >= ?", (day,)
        ).fetchone()
        return int(row[0])

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
        return meta_value(self._conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Set ``key`` to ``value``, in the open transaction or its own."""
        with transaction(self._conn):
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )


def _last_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT max(seq) FROM events").fetchone()[0] or 0)


def _accepted(seq: int, item: PreparedEvent, received_at: str) -> StoredEvent:
    # The caller's mapping, shallow-copied: re-parsing the body would cost as much as
    # writing it. It equals what query() returns for JSON-native envelopes.
    event = item.event
    return StoredEvent(
        seq, event.event_id, event.kind, item.timestamp, received_at, dict(event.envelope)
    )


def _stored(row: tuple[Any, ...]) -> StoredEvent:
    seq, event_id, kind, timestamp, received_at, body = row
    return StoredEvent(seq, event_id, kind, timestamp, received_at, json.loads(body))

"""The collector on PostgreSQL: any number of instances share one database.

A batch is parsed and validated off the event loop, then written in one transaction: its
envelopes (``COPY``, or ``INSERT ... ON CONFLICT DO NOTHING`` when some are stored already:
an event is stored once per team, by its event id, whichever stream or instance brings it
again; :func:`_store_events`), the team graph (:mod:`.team_graph`,
from the events this batch added), what the graph emitted, the stream's contact row and the
Idempotency-Key's answer. The answer is returned only after ``COMMIT`` (synchronous_commit
as the server has it, ``on`` by default), so an acknowledged batch is durable. No instance
keeps anything another one needs: two instances given the same batch store it once, and a
deadlock or serialization failure between them retries the transaction. Nothing outlives
the transaction on its connection (:mod:`.pg_connect`: PgBouncer's transaction pooling).

The answers (200, 400, 413, 422) are the SQLite collector's (:mod:`.store`), so a forwarder
cannot tell the two apart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool

from mplp_lsp.collector import team_graph
from mplp_lsp.collector.ingest import PROBLEMS, key_hash, stream_key_problem
from mplp_lsp.collector.pg_connect import PgOptions
from mplp_lsp.collector.pg_schema import migrate
from mplp_lsp.collector.store import (
    Answer,
    _encode,
    _source_of,
    envelope_problems,
    read_batch,
)
from mplp_lsp.collector.stream_report import StreamReport
from mplp_lsp.protocol.kinds import KIND_BY_EVENT_TYPE, Kind, detect_kind
from mplp_lsp.protocol.validator import EventValidator, default_validator

__all__ = ["PgCollector", "ReportedBacklog"]

log = logging.getLogger(__name__)

_RETRIES: Final = 5  # deadlocks between instances are rare; give up loudly after a few

_COLUMNS: Final = "stream, seq, source, event_id, kind, author, occurred_at, body"
# Made in the transaction that uses it: under PgBouncer's transaction pooling a session's
# temp table may be on another server connection (IF NOT EXISTS: made once per server
# connection, emptied at each commit).
_STAGING: Final = (
    b"CREATE TEMP TABLE IF NOT EXISTS incoming (stream text, seq bigint, source text,"
    b" event_id text, kind text, author text, occurred_at timestamptz, body text)"
    b" ON COMMIT DELETE ROWS"
)
_COPY_STAGED: Final = f"COPY incoming ({_COLUMNS}) FROM STDIN".encode()
_COPY_EVENTS: Final = f"COPY events ({_COLUMNS}) FROM STDIN".encode()
_INSERT_EVENTS: Final = (
    f"INSERT INTO events ({_COLUMNS}) SELECT {_COLUMNS} FROM incoming"  # noqa: S608
    " ORDER BY seq ON CONFLICT DO NOTHING"
).encode()
# When some were copies: the ids of the rows this batch did add (only their events change
# the graph), the rows of this transaction, one range of the (txid, id) key.
_ADDED: Final = b"SELECT event_id FROM events WHERE txid = pg_current_xact_id()"
# A batch without a reported backlog (an older forwarder, a split part) keeps the last one.
_TOUCH_STREAM: Final = b"""
INSERT INTO streams AS s (stream, first_contact, last_contact, last_seq, batches, accepted,
                          duplicates, backlog, backlog_oldest, backlog_reported_at,
                          clock_ahead_ms, clamped)
VALUES (%(stream)s, now(), now(), %(last_seq)s, 1, %(accepted)s, %(duplicates)s,
        %(backlog)s, %(oldest)s, CASE WHEN %(backlog)s::bigint IS NULL THEN NULL ELSE now() END,
        %(ahead_ms)s, %(clamped)s)
ON CONFLICT (stream) DO UPDATE
SET last_contact = greatest(s.last_contact, excluded.last_contact),
    last_seq = greatest(s.last_seq, excluded.last_seq),
    batches = s.batches + 1,
    accepted = s.accepted + excluded.accepted,
    duplicates = s.duplicates + excluded.duplicates,
    backlog = coalesce(excluded.backlog, s.backlog),
    backlog_oldest = CASE WHEN excluded.backlog IS NULL THEN s.backlog_oldest
                          ELSE excluded.backlog_oldest END,
    backlog_reported_at = coalesce(excluded.backlog_reported_at, s.backlog_reported_at),
    replaced_by = NULL,
    clock_ahead_ms = CASE WHEN excluded.accepted > 0 THEN excluded.clock_ahead_ms
                          ELSE s.clock_ahead_ms END,
    clamped = s.clamped + excluded.clamped
"""
_REPLAYED: Final = b"UPDATE streams SET replayed = replayed + 1 WHERE stream = %s"
# A report replaces the backlog whole (it is the outbox's depth now) and keeps what the
# forwarder says of itself; an older stream of the same origin, or the one a salvage
# ended, is marked replaced by this one.
_REPORT: Final = b"""
INSERT INTO streams AS s (stream, first_contact, last_contact, last_seq, batches, accepted,
                          duplicates, backlog, backlog_oldest, backlog_reported_at, origin,
                          machine, author)
VALUES (%(stream)s, now(), now(), 0, 0, 0, 0, %(backlog)s, %(oldest)s, now(), %(origin)s,
        %(machine)s, %(author)s)
ON CONFLICT (stream) DO UPDATE
SET last_contact = greatest(s.last_contact, excluded.last_contact),
    backlog = excluded.backlog,
    backlog_oldest = excluded.backlog_oldest,
    backlog_reported_at = excluded.backlog_reported_at,
    origin = coalesce(excluded.origin, s.origin),
    machine = coalesce(excluded.machine, s.machine),
    author = coalesce(excluded.author, s.author),
    replaced_by = NULL
RETURNING first_contact
"""
_REPLACED: Final = b"""
UPDATE streams SET replaced_by = %(stream)s
WHERE stream <> %(stream)s AND replaced_by IS NULL
  AND (stream = %(previous)s OR (origin = %(origin)s AND last_contact < %(first)s))
"""
_NAMED: Final = b"""
INSERT INTO team_people AS t (author, name, named_at) VALUES (%s, %s, now())
ON CONFLICT (author) DO UPDATE SET name = excluded.name, named_at = excluded.named_at
WHERE (excluded.named_at, excluded.name) > (t.named_at, t.name)
"""


@dataclass(frozen=True, slots=True)
class ReportedBacklog:
    """What a forwarder reported still queued behind its batch."""

    count: int
    oldest_at: datetime | None


Pool = AsyncConnectionPool[AsyncConnection[Any]]
Item = tuple[str, Kind | None, dict[str, Any]]  # (stream, stored kind, envelope)


@dataclass(frozen=True, slots=True)
class _Prepared:
    stream: str
    body_hash: str
    copy: bytes  # the events table's rows in seq order, as COPY's text format
    items: list[Item]  # the events the graph is made of
    ahead: dict[str, timedelta]  # events whose own time is ahead of their receipt
    graph: team_graph.GraphBatch  # the facts of every item
    clock: team_graph.Clock
    last_seq: int
    count: int


class PgCollector:
    """Shared by every request of one instance; all state lives in the database.

    ``pool`` gives the pool to use now (the instance renews it after an outage)."""

    def __init__(
        self,
        pool: Callable[[], Pool],
        graph_id: str,
        *,
        graph: bool = True,
        require_stream_keys: bool = False,
    ) -> None:
        self._pool = pool
        self._graph_id = graph_id
        self._graph_on = graph
        self._require_keys = require_stream_keys
        self._validator: EventValidator = default_validator()
        # Parsing and validating a batch is CPU work: off the loop, one batch at a time.
        self._cpu = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="collector-cpu")
        self._own_pool: Pool | None = None

    @property
    def pool(self) -> Pool:
        return self._pool()

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        password: str | None = None,
        max_connections: int = 8,
        graph: bool = True,
        require_stream_keys: bool = False,
    ) -> PgCollector:
        """A collector with a pool of its own, after the migrations (tools and tests; the
        server's instances use :class:`~mplp_lsp.collector.pg_database.Database`)."""
        options = PgOptions(url, password, pool_size=max_connections)
        async with await options.connect() as conn:
            await migrate(conn)
            cursor = await conn.execute("SELECT value FROM team_meta WHERE name = 'graph_id'")
            row = await cursor.fetchone()
        assert row is not None  # written by the first migration
        pool = options.pool()
        await pool.open(wait=True, timeout=30)
        collector = cls(
            lambda: pool, str(row[0]), graph=graph, require_stream_keys=require_stream_keys
        )
        collector._own_pool = pool
        return collector

    async def close(self) -> None:
        if self._own_pool is not None:
            await self._own_pool.close()
        self._cpu.shutdown(wait=True)

    async def receive(
        self,
        body: bytes,
        idempotency_key: str | None,
        backlog: ReportedBacklog | None = None,
        *,
        stream_key: str | None = None,
    ) -> Answer:
        """Handle one POSTed batch; the answer is what the HTTP response says.

        ``stream_key`` is the batch's ``Mplp-Stream-Key`` (:mod:`.ingest`)."""
        body_hash = hashlib.blake2b(body, digest_size=16).hexdigest()
        if idempotency_key is not None:
            replay = await self._replay(idempotency_key, body_hash)
            if replay is not None:
                return replay
        loop = asyncio.get_running_loop()
        prepared = await loop.run_in_executor(self._cpu, self._prepare, body, body_hash)
        if isinstance(prepared, Answer):
            return prepared
        for attempt in range(_RETRIES):
            try:
                return await self._write(prepared, idempotency_key, backlog, stream_key)
            except _StreamRefused as refused:
                return refused.answer
            except (errors.DeadlockDetected, errors.SerializationFailure):
                if attempt == _RETRIES - 1:
                    raise
                log.info("batch from stream %s met a concurrent one; retrying", prepared.stream)
        raise AssertionError("unreachable")

    async def _replay(self, key: str, body_hash: str) -> Answer | None:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT body_hash, status, answer, stream FROM idempotency WHERE key = %s", (key,)
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            if row[0] != body_hash:
                return Answer(
                    422,
                    {"error": "idempotency_key_reused", "message": "key reused with another body"},
                )
            if row[3] is not None:  # a re-send absorbed by the key: counted on its stream
                await conn.execute(_REPLAYED, (row[3],))
                await conn.commit()
        return Answer(int(row[1]), json.loads(row[2]))

    async def report(self, report: StreamReport, stream_key: str | None = None) -> Answer:
        """Keep what a forwarder reported of its stream (:mod:`.stream_report`); written only
        with the stream's key, as its batches are (403 otherwise)."""
        try:
            await self._keep_report(report, stream_key)
        except _StreamRefused as refused:
            return refused.answer
        return Answer(200, {"ok": True})

    async def _keep_report(self, report: StreamReport, stream_key: str | None) -> None:
        email = report.author_email
        author = team_graph.author_hash(email) if email else None
        async with self.pool.connection() as conn, conn.transaction():
            await self._claim(conn, report.stream, stream_key)
            cursor = await conn.execute(
                _REPORT,
                {
                    "stream": report.stream,
                    "backlog": report.backlog,
                    "oldest": report.backlog_oldest,
                    "origin": report.origin,
                    "machine": report.machine,
                    "author": author,
                },
            )
            row = await cursor.fetchone()
            assert row is not None
            if report.origin is not None or report.previous_stream is not None:
                await conn.execute(
                    _REPLACED,
                    {
                        "stream": report.stream,
                        "previous": report.previous_stream,
                        "origin": report.origin,
                        "first": row[0],
                    },
                )
            if author is not None and report.author_name:
                await conn.execute(_NAMED, (author, report.author_name))

    def _prepare(self, body: bytes, body_hash: str) -> _Prepared | Answer:
        try:
            parsed = read_batch(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            return Answer(400, {"error": "invalid_json", "message": str(error)[:200]})
        if isinstance(parsed, Answer):
            return parsed
        stream, items, plain = parsed
        kinds = [detect_kind(envelope) for _seq, envelope in items]
        problems = envelope_problems(self._validator, items, kinds, plain)
        if problems:
            return Answer(400, {"error": "invalid_envelopes", "items": problems})
        try:
            return self._rows(stream, items, kinds, body_hash)
        except (ValueError, KeyError, TypeError) as error:  # valid by schema, yet unusable
            return Answer(400, {"error": "invalid_envelopes", "message": str(error)[:200]})

    def _rows(
        self,
        stream: str,
        items: list[tuple[int, dict[str, Any]]],
        kinds: list[Kind | None],
        body_hash: str,
    ) -> _Prepared:
        stored_kinds = [
            _stored_kind(kind, envelope) for kind, (_, envelope) in zip(kinds, items, strict=True)
        ]
        # In sequence order, the order the rows are stored in: of an id the batch holds
        # twice, the first is stored and folded (_graph_of).
        folded: list[Item] = [
            (stream, kind, envelope)
            for kind, (_, envelope) in sorted(
                zip(stored_kinds, items, strict=True), key=lambda pair: pair[1][0]
            )
            if kind in _GRAPH_KINDS
        ]
        clock = team_graph.Clock(datetime.now(UTC))
        # The envelope's time, parsed once: the row's occurred_at and the clock's lead.
        rows = sorted(
            (
                seq,
                _source_of(envelope),
                envelope["event_id"],
                kind.value if kind else "unknown",
                _author(kind, envelope),
                team_graph.instant(envelope["timestamp"]),
                _encode(envelope),
            )
            for kind, (seq, envelope) in zip(stored_kinds, items, strict=True)
        )
        graph = team_graph.fold(folded, clock) if self._graph_on else team_graph.GraphBatch()
        return _Prepared(
            stream=stream,
            body_hash=body_hash,
            copy=_copy_text(stream, rows),
            items=folded if self._graph_on else [],
            ahead=team_graph.ahead_of(((row[2], row[5]) for row in rows), clock.received),
            graph=graph,
            clock=clock,
            last_seq=max((seq for seq, _ in items), default=0),
            count=len(items),
        )

    async def _graph_of(
        self, prepared: _Prepared, added: set[str]
    ) -> tuple[team_graph.GraphBatch, team_graph.Clock]:
        """The graph facts of the events this batch added, and what their times needed (a
        re-sent event's facts are in the graph already, folded when it was first stored)."""
        clock = team_graph.Clock(prepared.clock.received)
        fresh = []
        unfolded = set(added)  # a second copy of an id in this batch was not stored
        for item in prepared.items:
            event_id = item[2]["event_id"]
            if event_id in unfolded:
                unfolded.discard(event_id)
                fresh.append(item)
        if not fresh:
            return team_graph.GraphBatch(), clock
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._cpu, team_graph.fold, fresh, clock), clock

    async def _write(
        self,
        prepared: _Prepared,
        idempotency_key: str | None,
        backlog: ReportedBacklog | None,
        stream_key: str | None,
    ) -> Answer:
        async with self.pool.connection() as conn, conn.transaction():
            await self._claim(conn, prepared.stream, stream_key)
            accepted = await _store_events(conn, prepared.copy, prepared.count)
            duplicates = prepared.count - accepted
            added: set[str] | None = None
            if duplicates:
                rows = await (await conn.execute(_ADDED)).fetchall()
                added = {str(row[0]) for row in rows}
                graph, clock = await self._graph_of(prepared, added)
            else:  # the common case: every event is new, folded off the loop already
                graph, clock = prepared.graph, prepared.clock
            # The rest in pipeline mode: one round trip for the graph, one for the rest.
            async with conn.pipeline() as pipeline:
                emitted = await team_graph.apply(conn, graph, self._graph_id) if graph else []
                await pipeline.sync()
                if emitted:
                    kinds, bodies = team_graph.emitted_rows(emitted)
                    await conn.execute(
                        "INSERT INTO team_emitted (kind, body)"
                        " SELECT * FROM unnest(%b::text[], %b::text[])",
                        (kinds, bodies),
                    )
                ahead = max(
                    (
                        lead
                        for event_id, lead in prepared.ahead.items()
                        if added is None or event_id in added
                    ),
                    default=None,
                )
                await conn.execute(
                    _TOUCH_STREAM,
                    {
                        "stream": prepared.stream,
                        "last_seq": prepared.last_seq,
                        "accepted": accepted,
                        "duplicates": duplicates,
                        "backlog": None if backlog is None else backlog.count,
                        "oldest": None if backlog is None else backlog.oldest_at,
                        "ahead_ms": None if ahead is None else int(ahead.total_seconds() * 1000),
                        "clamped": clock.clamped,
                    },
                )
                answer = Answer(200, {"accepted": accepted, "duplicates": duplicates})
                if idempotency_key is not None:
                    await conn.execute(
                        "INSERT INTO idempotency (key, body_hash, status, answer, stream)"
                        " VALUES (%s, %s, 200, %s, %s) ON CONFLICT DO NOTHING",
                        (
                            idempotency_key,
                            prepared.body_hash,
                            json.dumps(answer.body),
                            prepared.stream,
                        ),
                    )
        return answer

    async def _claim(self, conn: AsyncConnection[Any], stream: str, offered: str | None) -> None:
        """Bind a stream without a key to the offered one, or raise :class:`_StreamRefused`
        (which rolls the batch's transaction back). Two instances binding the same new
        stream at once: the second waits for the first's row, then is judged against it."""
        if offered is not None:
            await conn.execute(
                "INSERT INTO stream_keys (stream, key_hash) VALUES (%s, %s)"
                " ON CONFLICT (stream) DO NOTHING",
                (stream, key_hash(offered)),
            )
        cursor = await conn.execute("SELECT key_hash FROM stream_keys WHERE stream = %s", (stream,))
        row = await cursor.fetchone()
        problem = stream_key_problem(
            None if row is None else str(row[0]), offered, required=self._require_keys
        )
        if problem is not None:
            log.warning("refused a batch for stream %s: %s", stream, problem)
            raise _StreamRefused(Answer(403, {"error": problem, "message": PROBLEMS[problem]}))


async def _store_events(conn: AsyncConnection[Any], rows: bytes, count: int) -> int:
    """Store the batch's rows (COPY text) but those whose event id is stored already; how
    many it stored. Most batches are all new: COPY straight into ``events``, in a savepoint.
    When the unique index refuses one (a copy stored before, by any stream or instance, or
    twice in this batch), the savepoint is rolled back and the batch goes the careful way:
    COPY into a staging table, then one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``.
    (The careful way for every batch cost PostgreSQL ~40% more per event: the staging
    copy, and the speculative insertion ON CONFLICT does for each row.) A concurrent
    transaction holding the same id makes the COPY wait for its end, as ON CONFLICT does."""
    try:
        async with conn.transaction(), conn.cursor().copy(_COPY_EVENTS) as copy:
            await copy.write(rows)
        return count
    except errors.UniqueViolation:
        pass
    await conn.execute(_STAGING)
    async with conn.cursor().copy(_COPY_STAGED) as copy:
        await copy.write(rows)
    inserted = await conn.execute(_INSERT_EVENTS)
    return max(inserted.rowcount, 0)


class _StreamRefused(Exception):
    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.body["error"])
        self.answer = answer


# COPY's text format: tab-separated, \N for NULL, and a backslash, tab, newline or carriage
# return inside a value written as an escape. A body is orjson's compact JSON, whose only
# such character can be a backslash (JSON escapes the others).
_COPY_ESCAPES: Final = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NEEDS_ESCAPE: Final = re.compile(r"[\\\t\n\r]")


def _copy_field(value: str | None) -> str:
    if value is None:
        return "\\N"
    return value.translate(_COPY_ESCAPES) if _NEEDS_ESCAPE.search(value) else value


def _copy_text(stream: str, rows: list[tuple[Any, ...]]) -> bytes:
    """The stream's ``rows`` (seq, source, event_id, kind, author, occurred_at, body) as COPY
    data. A kind is an enum value and an author a hex digest (or None): never escaped."""
    prefix = _copy_field(stream) + "\t"
    lines = [
        prefix
        + "\t".join(
            (
                str(seq),
                _copy_field(source),
                _copy_field(event_id),
                kind,
                "\\N" if author is None else author,
                occurred_at.isoformat(),
                body.replace("\\", "\\\\"),
            )
        )
        for seq, source, event_id, kind, author, occurred_at, body in rows
    ]
    lines.append("")
    return "\n".join(lines).encode()


_GRAPH_KINDS: Final = frozenset({Kind.GIT, Kind.FILE_UPDATE, Kind.CI})


def _stored_kind(kind: Kind | None, envelope: Mapping[str, Any]) -> Kind | None:
    """What the event is stored as: an envelope as its payload's kind (as the local log)."""
    if kind is Kind.ENVELOPE:
        return KIND_BY_EVENT_TYPE.get(str(envelope.get("event_type")))
    return kind


def _author(kind: Kind | None, envelope: Mapping[str, Any]) -> str | None:
    if kind is not Kind.GIT:
        return None
    email = envelope["payload"].get("author_email")
    return team_graph.author_hash(email) if isinstance(email, str) and email else None

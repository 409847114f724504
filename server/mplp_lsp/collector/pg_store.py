"""The collector on PostgreSQL: any number of instances share one database.

A batch is parsed and validated off the event loop, then written in one transaction: its
envelopes (``INSERT ... ON CONFLICT DO NOTHING`` on the stream's dedup key), the team graph
(:mod:`.team_graph`), what the graph emitted, the stream's contact row and the
Idempotency-Key's answer. The answer is returned only after ``COMMIT`` (synchronous_commit
as the server has it, ``on`` by default), so an acknowledged batch is durable. No instance
keeps anything another one needs: two instances given the same batch store it once, and a
deadlock or serialization failure between them retries the transaction.

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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection, errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from mplp_lsp.collector import team_graph
from mplp_lsp.collector.ingest import PROBLEMS, key_hash, stream_key_problem
from mplp_lsp.collector.pg_schema import migrate
from mplp_lsp.collector.store import (
    Answer,
    _encode,
    _items,
    _parse,
    _source_of,
    envelope_problems,
)
from mplp_lsp.protocol.kinds import KIND_BY_EVENT_TYPE, Kind, detect_kind
from mplp_lsp.protocol.validator import EventValidator, default_validator

__all__ = ["PgCollector", "ReportedBacklog", "url_problem"]

log = logging.getLogger(__name__)

_RETRIES: Final = 5  # deadlocks between instances are rare; give up loudly after a few

_COLUMNS: Final = "stream, seq, source, event_id, kind, author, occurred_at, body"
_STAGING: Final = (
    b"CREATE TEMP TABLE IF NOT EXISTS incoming (stream text, seq bigint, source text,"
    b" event_id text, kind text, author text, occurred_at timestamptz, body text)"
    b" ON COMMIT DELETE ROWS"
)
_COPY_STAGED: Final = f"COPY incoming ({_COLUMNS}) FROM STDIN".encode()
_INSERT_EVENTS: Final = (
    f"INSERT INTO events ({_COLUMNS}) SELECT {_COLUMNS} FROM incoming"  # noqa: S608
    " ORDER BY seq ON CONFLICT DO NOTHING"
).encode()
# A batch without a reported backlog (an older forwarder, a split part) keeps the last one.
_TOUCH_STREAM: Final = b"""
INSERT INTO streams AS s (stream, first_contact, last_contact, last_seq, batches, accepted,
                          duplicates, backlog, backlog_oldest)
VALUES (%s, now(), now(), %s, 1, %s, %s, %s, %s)
ON CONFLICT (stream) DO UPDATE
SET last_contact = greatest(s.last_contact, excluded.last_contact),
    last_seq = greatest(s.last_seq, excluded.last_seq),
    batches = s.batches + 1,
    accepted = s.accepted + excluded.accepted,
    duplicates = s.duplicates + excluded.duplicates,
    backlog = coalesce(excluded.backlog, s.backlog),
    backlog_oldest = CASE WHEN excluded.backlog IS NULL THEN s.backlog_oldest
                          ELSE excluded.backlog_oldest END
"""


def url_problem(url: str) -> str | None:
    """Why this URL may not be used, or None: a password in it would be in argv and logs."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL URL cannot be parsed"
    if "password" in params:
        return (
            "the PostgreSQL URL has a password in it; put it in PGPASSWORD, a pgpass file "
            "or --db-password-file instead"
        )
    return None


@dataclass(frozen=True, slots=True)
class ReportedBacklog:
    """What a forwarder reported still queued behind its batch."""

    count: int
    oldest_at: datetime | None


@dataclass(frozen=True, slots=True)
class _Prepared:
    stream: str
    body_hash: str
    copy: bytes  # the events table's rows in seq order, as COPY's text format
    graph: team_graph.GraphBatch
    last_seq: int
    count: int


class PgCollector:
    """Shared by every request of one instance; all state lives in the database."""

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        graph_id: str,
        *,
        graph: bool,
        require_stream_keys: bool = False,
    ) -> None:
        self.pool = pool
        self._graph_id = graph_id
        self._graph_on = graph
        self._require_keys = require_stream_keys
        self._validator: EventValidator = default_validator()
        # Parsing and validating a batch is CPU work: off the loop, one batch at a time.
        self._cpu = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="collector-cpu")

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
        # Times come back in UTC whatever the server's default zone is.
        kwargs: dict[str, Any] = {
            "application_name": "mplp-lsp collector",
            "options": "-c timezone=UTC",
        }
        if password is not None:
            kwargs["password"] = password
        async with await AsyncConnection.connect(url, autocommit=True, **kwargs) as conn:
            await migrate(conn)
            cursor = await conn.execute("SELECT value FROM team_meta WHERE name = 'graph_id'")
            row = await cursor.fetchone()
        assert row is not None  # written by the first migration
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            kwargs=kwargs,
            open=False,
            configure=_create_staging,
        )
        await pool.open(wait=True, timeout=30)
        return cls(pool, str(row[0]), graph=graph, require_stream_keys=require_stream_keys)

    async def close(self) -> None:
        await self.pool.close()
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
                "SELECT body_hash, status, answer FROM idempotency WHERE key = %s", (key,)
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        if row[0] != body_hash:
            return Answer(
                422, {"error": "idempotency_key_reused", "message": "key reused with another body"}
            )
        return Answer(int(row[1]), json.loads(row[2]))

    def _prepare(self, body: bytes, body_hash: str) -> _Prepared | Answer:
        try:
            batch = _parse(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            return Answer(400, {"error": "invalid_json", "message": str(error)[:200]})
        parsed = _items(batch)
        if isinstance(parsed, Answer):
            return parsed
        stream, items = parsed
        kinds = [detect_kind(envelope) for _seq, envelope in items]
        problems = envelope_problems(self._validator, items, kinds)
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
        rows = sorted(
            (
                stream,
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
        graph = (
            team_graph.fold(
                (stream, kind, envelope)
                for kind, (_, envelope) in zip(stored_kinds, items, strict=True)
            )
            if self._graph_on
            else team_graph.GraphBatch()
        )
        return _Prepared(
            stream=stream,
            body_hash=body_hash,
            copy=_copy_text(rows),
            graph=graph,
            last_seq=max((seq for seq, _ in items), default=0),
            count=len(items),
        )

    async def _write(
        self,
        prepared: _Prepared,
        idempotency_key: str | None,
        backlog: ReportedBacklog | None,
        stream_key: str | None,
    ) -> Answer:
        async with self.pool.connection() as conn, conn.transaction():
            await self._claim(conn, prepared.stream, stream_key)
            # COPY into a per-session staging table, then one INSERT ... SELECT: COPY's
            # row encoding is ~3x cheaper than binding 1000-element arrays of JSON bodies.
            # The rows were encoded off the loop; the loop only sends them.
            async with conn.cursor().copy(_COPY_STAGED) as copy:
                await copy.write(prepared.copy)
            # The rest in pipeline mode: two round trips instead of one per statement.
            async with conn.pipeline() as pipeline:
                inserted = await conn.execute(_INSERT_EVENTS)
                emitted = (
                    await team_graph.apply(conn, prepared.graph, self._graph_id)
                    if prepared.graph
                    else []
                )
                await pipeline.sync()
                accepted = max(inserted.rowcount, 0)
                duplicates = prepared.count - accepted
                if emitted:
                    kinds, bodies = team_graph.emitted_rows(emitted)
                    await conn.execute(
                        "INSERT INTO team_emitted (kind, body)"
                        " SELECT * FROM unnest(%b::text[], %b::text[])",
                        (kinds, bodies),
                    )
                await conn.execute(
                    _TOUCH_STREAM,
                    (
                        prepared.stream,
                        prepared.last_seq,
                        accepted,
                        duplicates,
                        None if backlog is None else backlog.count,
                        None if backlog is None else backlog.oldest_at,
                    ),
                )
                answer = Answer(200, {"accepted": accepted, "duplicates": duplicates})
                if idempotency_key is not None:
                    await conn.execute(
                        "INSERT INTO idempotency (key, body_hash, status, answer)"
                        " VALUES (%s, %s, 200, %s) ON CONFLICT DO NOTHING",
                        (idempotency_key, prepared.body_hash, json.dumps(answer.body)),
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


class _StreamRefused(Exception):
    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.body["error"])
        self.answer = answer


async def _create_staging(conn: AsyncConnection[Any]) -> None:
    await conn.execute(_STAGING)
    await conn.commit()


# COPY's text format: tab-separated, \N for NULL, and a backslash, tab, newline or carriage
# return inside a value written as an escape. A body is orjson's compact JSON, whose only
# such character can be a backslash (JSON escapes the others).
_COPY_ESCAPES: Final = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NEEDS_ESCAPE: Final = re.compile(r"[\\\t\n\r]")


def _copy_field(value: str | None) -> str:
    if value is None:
        return "\\N"
    return value.translate(_COPY_ESCAPES) if _NEEDS_ESCAPE.search(value) else value


def _copy_text(rows: list[tuple[Any, ...]]) -> bytes:
    """``rows`` (stream, seq, source, event_id, kind, author, occurred_at, body) as COPY data."""
    lines = [
        "\t".join(
            (
                _copy_field(stream),
                str(seq),
                _copy_field(source),
                _copy_field(event_id),
                _copy_field(kind),
                _copy_field(author),
                occurred_at.isoformat(),
                body.replace("\\", "\\\\"),
            )
        )
        for stream, seq, source, event_id, kind, author, occurred_at, body in rows
    ]
    lines.append("")
    return "\n".join(lines).encode()


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

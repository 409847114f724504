"""The collector's own SQLite database: received envelopes and answered Idempotency-Keys.

A batch is handled in one transaction at ``synchronous=FULL``: the 2xx goes out only after
every envelope of the batch (and the key's answer) is durable, so a forwarder that saw the
2xx may forget the batch. An event is stored once by its event id (a UUID, unique across
the team; case does not matter), whichever stream brings it: a re-sent envelope, or one a
salvaged store sends again under a new stream, is counted as a duplicate. An
Idempotency-Key seen before with the same body gets the first answer again without touching
the envelopes; with a different body it is refused with 422 (the key was reused by mistake).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from mplp_lsp.collector.ingest import PROBLEMS, key_hash, stream_key_problem
from mplp_lsp.protocol import json_input
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.file_payload import plain_file_envelope
from mplp_lsp.protocol.kinds import EVENT_FAMILY_KINDS, Kind, detect_kind
from mplp_lsp.protocol.result import ErrorCode
from mplp_lsp.protocol.validator import EventValidator, default_validator
from mplp_lsp.store.database import (
    BUSY_TIMEOUT_MS,
    WAL_CHECKPOINT_PAGES,
    WAL_SIZE_LIMIT,
    make_private,
    split_script,
    transaction,
)

__all__ = ["Answer", "CollectorStore"]

_CACHE_KIB = 16 * 1024  # a server ingesting batches: its index pages stay in memory

MAX_ITEMS: Final = 10_000
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS received (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    stream      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    received_at TEXT NOT NULL,
    body        TEXT NOT NULL,
    UNIQUE (source, event_id)
);
CREATE TABLE IF NOT EXISTS idempotency (
    key       TEXT PRIMARY KEY,
    body_hash TEXT NOT NULL,
    status    INTEGER NOT NULL,
    answer    TEXT NOT NULL,
    at        TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS stats (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""
# 2: each stream's write key (its hash), bound by the first batch that brings one.
_STREAM_KEYS: Final = """
CREATE TABLE stream_keys (
    stream   TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    bound_at TEXT NOT NULL
);
"""
# 3: once per event id across streams (it was per (source, event_id)). Copies stored under
# other sources are removed, the first received kept (ids, and so page cursors, stay); the
# removed ones are counted as duplicates.
_ONCE_PER_EVENT: Final = """
CREATE TABLE received_once (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    event_id    TEXT NOT NULL UNIQUE COLLATE NOCASE,
    stream      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    received_at TEXT NOT NULL,
    body        TEXT NOT NULL
);
INSERT INTO received_once (id, source, event_id, stream, seq, received_at, body)
SELECT id, source, event_id, stream, seq, received_at, body FROM received WHERE true ORDER BY id
ON CONFLICT DO NOTHING;
INSERT INTO stats (name, value)
SELECT 'duplicates', (SELECT count(*) FROM received) - (SELECT count(*) FROM received_once)
WHERE (SELECT count(*) FROM received) > (SELECT count(*) FROM received_once)
ON CONFLICT (name) DO UPDATE SET value = value + excluded.value;
DROP TABLE received;
ALTER TABLE received_once RENAME TO received;
"""
# Numbered migrations: entry n brings user_version n-1 to n. The first one's IF NOT EXISTS
# also adopts a database made before versioning (user_version 0, tables present).
MIGRATIONS: Final = (_SCHEMA, _STREAM_KEYS, _ONCE_PER_EVENT)
_ACCEPTED_KINDS: Final = frozenset({Kind.ENVELOPE, *EVENT_FAMILY_KINDS})
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: dict[str, Any]


class CollectorStore:
    """Use from one thread (the app runs every call on one worker thread)."""

    def __init__(
        self,
        path: Path,
        validator: EventValidator | None = None,
        *,
        require_stream_keys: bool = False,
    ) -> None:
        self.path = path
        self._validator = validator or default_validator()
        self._require_keys = require_stream_keys
        make_private(path)  # every team event is in it: this user's file, 0600, not a link
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        # The (source, event_id) index takes random keys, so each batch dirties hundreds of
        # its pages: checkpoint less often (see the store's connect()) and keep more of the
        # index in memory. Durability is the same (WAL, synchronous=FULL).
        self._conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        self._conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        self._conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        migrate(self._conn)

    def close(self) -> None:
        self._conn.close()

    def receive(
        self, body: bytes, idempotency_key: str | None, stream_key: str | None = None
    ) -> Answer:
        """Handle one POSTed batch; the answer is what the HTTP response says.

        ``stream_key`` is the batch's ``Mplp-Stream-Key`` (:mod:`.ingest`)."""
        body_hash = hashlib.blake2b(body, digest_size=16).hexdigest()
        if idempotency_key is not None:
            replay = self._replay(idempotency_key, body_hash)
            if replay is not None:
                return replay
        try:
            parsed = read_batch(body)
        except json_input.JsonRejected as rejected:
            return Answer(400, {"error": str(rejected.code), "message": rejected.message})
        except (ValueError, UnicodeDecodeError) as error:
            return Answer(400, {"error": "invalid_json", "message": str(error)[:200]})
        if isinstance(parsed, Answer):
            return parsed
        source_stream, items, plain = parsed
        problems = envelope_problems(
            self._validator, items, [detect_kind(envelope) for _seq, envelope in items], plain
        )
        if problems:
            self._bump("rejected_batches", 1)
            return Answer(400, {"error": "invalid_envelopes", "items": problems})
        received_at = utc_timestamp()
        rows = [
            (
                _source_of(envelope),
                envelope["event_id"],
                source_stream,
                seq,
                received_at,
                _encode(envelope),
            )
            for seq, envelope in items
        ]
        with transaction(self._conn):
            refused = self._claim(source_stream, stream_key, received_at)
            if refused is not None:
                return refused
            cursor = self._conn.cursor()
            # One executemany for the batch; the rows it added are the change count's growth
            # (ON CONFLICT DO NOTHING: a duplicate adds nothing).
            before = self._conn.total_changes
            cursor.executemany(
                "INSERT INTO received (source, event_id, stream, seq, received_at, body)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
            )
            accepted = self._conn.total_changes - before
            answer = Answer(200, {"accepted": accepted, "duplicates": len(items) - accepted})
            if idempotency_key is not None:
                cursor.execute(
                    "INSERT INTO idempotency (key, body_hash, status, answer, at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (idempotency_key, body_hash, 200, json.dumps(answer.body), received_at),
                )
            self._bump("batches", 1)
            self._bump("duplicates", len(items) - accepted)
        return answer

    def _claim(self, stream: str, offered: str | None, now: str) -> Answer | None:
        """Bind a stream without a key to the offered one; the 403 for a batch that may not
        write the stream. Inside the batch's transaction."""
        row = self._conn.execute(
            "SELECT key_hash FROM stream_keys WHERE stream = ?", (stream,)
        ).fetchone()
        bound = None if row is None else str(row[0])
        problem = stream_key_problem(bound, offered, required=self._require_keys)
        if problem is not None:
            self._bump("refused_stream_writes", 1)
            return Answer(403, {"error": problem, "message": PROBLEMS[problem]})
        if bound is None and offered is not None:
            self._conn.execute(
                "INSERT INTO stream_keys (stream, key_hash, bound_at) VALUES (?, ?, ?)",
                (stream, key_hash(offered), now),
            )
        return None

    def _replay(self, key: str, body_hash: str) -> Answer | None:
        row = self._conn.execute(
            "SELECT body_hash, status, answer FROM idempotency WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        if row[0] != body_hash:
            return Answer(
                422, {"error": "idempotency_key_reused", "message": "key reused with another body"}
            )
        with transaction(self._conn):
            self._bump("replayed_batches", 1)
        return Answer(int(row[1]), json.loads(row[2]))

    def _bump(self, name: str, by: int) -> None:
        self._conn.execute(
            "INSERT INTO stats (name, value) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            (name, by),
        )

    def events(
        self, *, after: int = 0, limit: int = 1000, source: str | None = None
    ) -> list[dict[str, Any]]:
        sql = (
            "SELECT id, source, event_id, stream, seq, received_at, body FROM received WHERE id > ?"
        )
        params: list[Any] = [after]
        if source is not None:
            sql += " AND source = ?"
            params.append(source)
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        return [
            {
                "id": row[0],
                "source": row[1],
                "event_id": row[2],
                "stream": row[3],
                "seq": row[4],
                "received_at": row[5],
                "envelope": json.loads(row[6]),
            }
            for row in self._conn.execute(sql, params)
        ]

    def stats(self) -> dict[str, int]:
        values = {str(n): int(v) for n, v in self._conn.execute("SELECT name, value FROM stats")}
        (count,) = self._conn.execute("SELECT count(*) FROM received").fetchone()
        return {"stored": int(count), **values}


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the pending migrations; ``BEGIN IMMEDIATE`` is the lock between processes."""
    with transaction(conn):
        (current,) = conn.execute("PRAGMA user_version").fetchone()
        for version, script in enumerate(MIGRATIONS[current:], start=current + 1):
            for statement in split_script(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
    return max(int(current), len(MIGRATIONS))


# orjson parses a batch about 3x faster than json, but it reads an integer beyond 64 bits
# (above 2**64 - 1, or below -2**63: 20 digits, or a minus and 19) as a float where json
# keeps it exact; a body with such a number takes json. A number follows a [ : or , and
# optional white space; with every digit mapped to 0 and white space dropped (one C pass,
# far cheaper than a regex), that is a few substrings to look for. A long run of digits
# inside a string (a commit id) is not a number and keeps orjson.
_DIGITS_TO_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")
_WHITE_SPACE: Final = b" \t\n\r"
_LONG_NUMBERS: Final = tuple(
    start + digits for start in (b"[", b":", b",") for digits in (b"0" * 20, b"-" + b"0" * 19)
)


def _has_long_number(body: bytes) -> bool:
    squeezed = body.translate(_DIGITS_TO_ZERO, _WHITE_SPACE)
    return any(number in squeezed for number in _LONG_NUMBERS)


# A batch holds items holding envelopes: three levels above an envelope's own.
_BATCH_DEPTH: Final = json_input.MAX_DEPTH + 3

Items = list[tuple[int, dict[str, Any]]]


def read_batch(body: bytes) -> tuple[str, Items, frozenset[int]] | Answer:
    """The batch's stream, its (seq, envelope) items and the ids of the envelopes that are
    plain file events (:func:`~mplp_lsp.protocol.file_payload.plain_file_envelope`: valid,
    and two levels deep), or the 400/413 answer for a batch of the wrong shape.

    Raises :class:`~mplp_lsp.protocol.json_input.JsonRejected` (nested deeper than an
    envelope may be: validation recurses), ValueError or UnicodeDecodeError for a body
    that is not such JSON. Plain envelopes are recognised before the depth is checked (the
    test does not recurse), so the walk skips them: it was a sixth of a batch's reading."""
    batch = _parse(body)
    parsed = _items(batch)
    if isinstance(parsed, Answer):
        json_input.check_depth(batch, _BATCH_DEPTH)  # too deep is said first, as it was
        return parsed
    stream, items = parsed
    plain = frozenset(id(envelope) for _seq, envelope in items if plain_file_envelope(envelope))
    json_input.check_depth(batch, _BATCH_DEPTH, checked=plain)
    return stream, items, plain


def _parse(body: bytes) -> Any:
    """The batch as Python objects; NaN, infinities and lone surrogates are invalid JSON.
    Its depth is checked by the caller (:func:`read_batch`)."""
    if _has_long_number(body):
        try:
            return json.loads(body, parse_constant=_no_constant)
        except RecursionError:
            raise json_input.JsonRejected(
                ErrorCode.NESTING_TOO_DEEP, f"nested deeper than {_BATCH_DEPTH} levels"
            ) from None
    return orjson.loads(body)  # refuses nesting past 1024 levels itself


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _encode(envelope: Mapping[str, Any]) -> str:
    try:
        return orjson.dumps(envelope).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits (parsed by json above)
        return _ENCODER.encode(envelope)


def _items(batch: Any) -> tuple[str, list[tuple[int, dict[str, Any]]]] | Answer:
    """The batch's stream and its (seq, envelope) items, or the 400/413 answer."""
    if not isinstance(batch, Mapping) or not isinstance(batch.get("items"), list):
        return Answer(400, {"error": "invalid_batch", "message": 'expected {"items": [...]}'})
    stream = batch.get("source", "")
    if not isinstance(stream, str):
        return Answer(400, {"error": "invalid_batch", "message": "source must be a string"})
    raw_items = batch["items"]
    if len(raw_items) > MAX_ITEMS:
        return Answer(413, {"error": "too_many_items", "message": f"at most {MAX_ITEMS} per batch"})
    items: list[tuple[int, dict[str, Any]]] = []
    for index, item in enumerate(raw_items):
        envelope = item.get("envelope") if isinstance(item, Mapping) else None
        seq = item.get("seq", 0) if isinstance(item, Mapping) else None
        if (
            not isinstance(envelope, dict)
            or not isinstance(envelope.get("event_id"), str)
            or not isinstance(seq, int)
            or isinstance(seq, bool)
        ):
            return Answer(
                400,
                {
                    "error": "invalid_batch",
                    "message": f"item {index} needs an integer seq and an envelope with event_id",
                },
            )
        items.append((seq, envelope))
    return stream, items


def _source_of(envelope: Mapping[str, Any]) -> str:
    source = envelope.get("source")
    return source if isinstance(source, str) else ""


def envelope_problems(
    validator: EventValidator,
    items: list[tuple[int, dict[str, Any]]],
    kinds: list[Kind | None],
    plain: frozenset[int] = frozenset(),
) -> list[dict[str, Any]]:
    """What is wrong with each envelope of a batch that is not a valid MPLP event (at most
    ten errors each), by its index in the batch; empty when all are valid. Envelopes whose
    ids are in ``plain`` are valid (:func:`read_batch`; the validator says so too)."""
    problems = []
    for index, ((_seq, envelope), kind) in enumerate(zip(items, kinds, strict=True)):
        if id(envelope) in plain:
            continue
        if kind not in _ACCEPTED_KINDS:
            errors = [{"path": "", "code": "unknown_kind", "message": "not an MPLP event"}]
        else:
            assert kind is not None
            result = validator.validate(kind, envelope)
            if result.ok:
                continue
            errors = [issue.to_dict() for issue in result.errors]
        problems.append(
            {"index": index, "event_id": envelope.get("event_id"), "errors": errors[:10]}
        )
    return problems

"""The durable local store: schema and migrations, event log, single writer, error log.

Everything runs against real SQLite files in tmp_path; the crash test kills a real writer
process with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mplp_lsp.graph import pending
from mplp_lsp.store import (
    SCHEMA_VERSION,
    EventLog,
    IntegrationErrorLog,
    NewEvent,
    StoredEvent,
    StoreVersionError,
    StoreWriter,
    connect,
    database,
    transaction,
)
from mplp_lsp.store.database import split_script
from mplp_lsp.store.dedup import event_key as _payload_key
from mplp_lsp.store.dedup import id_key
from tests.conftest import sample
from tests.old_store import store_at_version
from tests.support.properties import examples
from tests.support.stores import make_event

SERVER = Path(__file__).resolve().parents[2] / "server"
UTC_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER), env.get("PYTHONPATH")]))
    return env


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "events.db"


@pytest.fixture
def conn(db: Path) -> Iterator[sqlite3.Connection]:
    connection = connect(db)
    yield connection
    connection.close()


# -- database: pragmas, migrations, read-only ----------------------------------------------


def test_connect_sets_durability_pragmas(conn: sqlite3.Connection) -> None:
    def pragma(name: str) -> object:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]

    assert pragma("journal_mode") == "wal"
    assert pragma("synchronous") == 2  # FULL
    assert pragma("busy_timeout") == 5000
    assert pragma("foreign_keys") == 1
    assert pragma("auto_vacuum") == 2  # INCREMENTAL
    assert pragma("user_version") == SCHEMA_VERSION == len(database.MIGRATIONS)
    assert conn.isolation_level is None
    assert not conn.in_transaction


def test_schema_v1_tables_and_indexes(conn: sqlite3.Connection) -> None:
    names = {
        row[0]: row[1] for row in conn.execute("SELECT name, type FROM sqlite_master").fetchall()
    }
    for table in ("events", "counters", "meta", "psg_files"):
        assert names[table] == "table"
    assert names["events_kind_seq"] == "index"
    assert names["events_time"] == "index"  # (occurred_at, seq, kind): event-time order since v14
    assert names["timeline_hours"] == "table"
    columns = [row[1] for row in conn.execute("PRAGMA table_info(psg_files)")]
    assert columns == [
        "path",
        "last_modified",
        "size",
        "mtime_ns",
        "content_hash",
        "updated_seq",
        "inode",
    ]


def test_reopening_keeps_data_and_does_not_reapply(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = connect(db)
    EventLog(first).append([make_event(1)])
    first.close()
    v2 = "CREATE TABLE extra (x INTEGER); INSERT INTO meta (key, value) VALUES ('v2', 'applied');"
    monkeypatch.setattr(database, "MIGRATIONS", (*database.MIGRATIONS, v2))
    for _ in range(3):
        again = connect(db)
        assert again.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert again.execute("SELECT count(*) FROM meta WHERE key = 'v2'").fetchone()[0] == 1
        assert len(EventLog(again).query()) == 1
        again.close()


def test_failed_migration_leaves_previous_version(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(db).close()
    broken = "CREATE TABLE extra (x INTEGER); INSERT INTO missing_table VALUES (1);"
    monkeypatch.setattr(database, "MIGRATIONS", (*database.MIGRATIONS, broken))
    with pytest.raises(sqlite3.OperationalError, match="missing_table"):
        connect(db)
    monkeypatch.undo()
    conn = connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "extra" not in tables
    conn.close()


def test_newer_schema_is_refused(db: Path) -> None:
    conn = connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreVersionError, match="99"):
        connect(db)


def test_split_script_respects_strings_comments_and_triggers() -> None:
    script = """
        -- a comment; with a semicolon
        CREATE TABLE t (x TEXT DEFAULT 'a;b');
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN
            UPDATE t SET x = 'c;d'; DELETE FROM t WHERE x = ';';
        END;
        INSERT INTO t VALUES (';');
    """
    statements = split_script(script)
    assert len(statements) == 3
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")
    with pytest.raises(ValueError, match="incomplete"):
        split_script("CREATE TABLE t (x); SELECT 1")


def test_read_only_connection_cannot_write(db: Path) -> None:
    writer = connect(db)
    EventLog(writer).append([make_event(1)])
    reader = connect(db, read_only=True)
    assert [e.event_id for e in EventLog(reader).query()] == ["id-1"]
    with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only"):
        EventLog(reader).append([make_event(2)])
    with pytest.raises(sqlite3.OperationalError):
        reader.execute("DELETE FROM events")
    reader.close()
    writer.close()


def test_read_only_connection_applies_no_migrations(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    plain = sqlite3.connect(path)
    plain.execute("CREATE TABLE other (x INTEGER)")
    plain.commit()
    plain.close()
    reader = connect(path, read_only=True)
    assert reader.execute("PRAGMA user_version").fetchone()[0] == 0
    tables = {row[0] for row in reader.execute("SELECT name FROM sqlite_master")}
    assert tables == {"other"}
    reader.close()
    with pytest.raises(FileNotFoundError):
        connect(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


READER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mplp_lsp.store import EventLog, connect
    conn = connect(Path(sys.argv[1]), read_only=True)
    print(",".join(e.event_id for e in EventLog(conn).query()))
    """
)


def read_in_other_process(db: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", READER, str(db)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
        check=True,
    )
    return [part for part in done.stdout.strip().split(",") if part]


def test_reader_process_sees_committed_rows_while_writer_is_open(db: Path) -> None:
    writer = connect(db)
    log = EventLog(writer)
    log.append([make_event(1), make_event(2)])
    writer.execute("BEGIN IMMEDIATE")
    log.append([make_event(3)])  # joins the open transaction: not committed yet
    assert read_in_other_process(db) == ["id-1", "id-2"]
    writer.execute("COMMIT")
    assert read_in_other_process(db) == ["id-1", "id-2", "id-3"]
    writer.close()


# -- event log -----------------------------------------------------------------------------


def test_append_returns_stored_events_in_seq_order(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    results = log.append([make_event(1), make_event(2, kind="git_event")])
    assert [r.seq for r in results if r] == [1, 2]
    first = results[0]
    assert first is not None
    assert first.event_id == "id-1" and first.kind == "file_update"
    assert UTC_MS.fullmatch(first.received_at)
    assert first.timestamp == "2026-03-02T08:00:00.000Z"
    assert log.query() == results


def test_body_is_compact_json_with_unicode_kept(conn: sqlite3.Connection) -> None:
    event = make_event(1, note="café ✓")
    EventLog(conn).append([event])
    (body,) = conn.execute("SELECT body FROM events").fetchone()
    assert body == json.dumps(event.envelope, ensure_ascii=False, separators=(",", ":"))
    assert "café ✓" in body


def test_duplicate_dedup_key_is_none(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    assert log.append([make_event(1, key="same")])[0] is not None
    assert log.append([make_event(2, key="same")]) == [None]
    assert [e.event_id for e in log.query()] == ["id-1"]


def test_hash_dedup_keys_are_stored_as_16_bytes_and_still_deduplicate(
    conn: sqlite3.Connection,
) -> None:
    log = EventLog(conn)
    hashed = "0123456789abcdef" * 2
    assert log.append([make_event(1, key=hashed), make_event(2, key="ABCDEF" * 5 + "ab")])
    stored = dict(conn.execute("SELECT event_id, dedup_key FROM events"))
    assert stored == {"id-1": bytes.fromhex(hashed), "id-2": "ABCDEF" * 5 + "ab"}
    assert log.append([make_event(3, key=hashed)]) == [None]


def test_older_stores_keep_recognising_their_events_after_the_key_migrations(db: Path) -> None:
    """Keys written in hex, as 16 bytes or as ``id:<event_id>`` catch duplicates after upgrade."""
    file_update = sample("file_update")
    payload_key = _payload_key("file_update", file_update)
    l3 = sample("graph_update")
    old_forms = [
        ("id-1", payload_key[4:].hex(), {"event_id": "id-1", "payload": file_update}),
        ("id-2", f"id:{l3['event_id']}", l3),
        ("id-3", "k3", {"event_id": "id-3"}),
    ]
    old = store_at_version(db, database.MIGRATIONS.index(database._COMPACT_DEDUP_KEYS))
    for event_id, key, body in old_forms:
        old.execute(
            "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
            " VALUES (?, 'file_update', ?, 't', 't', ?)",
            (event_id, key, json.dumps(body)),
        )
    old.close()
    conn = connect(db)
    keys = dict(conn.execute("SELECT event_id, dedup_key FROM events"))
    today = [payload_key, id_key(l3["event_id"], l3["timestamp"]), "k3"]
    assert keys == dict(zip(["id-1", "id-2", "id-3"], today, strict=True))
    # Leading with the event's own time: the payload's timestamp, in whole seconds.
    moment = datetime.fromisoformat(file_update["timestamp"])
    assert int.from_bytes(payload_key[:4], "big") == int(moment.timestamp())
    again = [make_event(n, key=key) for n, key in enumerate(today, start=4)]  # type: ignore[arg-type]
    assert EventLog(conn).append(again) == [None, None, None]
    conn.close()


def test_a_migration_that_rebuilt_the_log_gives_the_old_pages_back(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rebuilt_at = database.MIGRATIONS.index(database._TIMED_KEYS)
    old = store_at_version(db, rebuilt_at)
    body = json.dumps({"payload": {"text": "x" * 1000}})
    old.executemany(
        "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
        " VALUES (?, 'file_update', ?, 't', 't', ?)",
        [(f"id-{n}", f"key-{n}", body) for n in range(3000)],
    )
    old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    old.close()
    before = db.stat().st_size
    with caplog.at_level(logging.WARNING, logger="mplp_lsp.store.database"):
        conn = connect(db)  # copies the log into a new table and drops the old one
    assert f"from schema {rebuilt_at} to {database.SCHEMA_VERSION}" in caplog.text
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert db.stat().st_size < 1.1 * before


def test_entries_queued_by_the_old_triggers_stay_counted_after_the_upgrade(db: Path) -> None:
    """Migration 9 drops the per-event queue triggers; what they queued is kept as it was."""
    old = store_at_version(db, database.MIGRATIONS.index(database._QUEUE_PER_APPEND))
    old.execute("UPDATE outbox_state SET enabled = 1")
    old.executemany(
        "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
        " VALUES (?, 'file_update', ?, 't', 't', ?)",
        [(f"id-{n}", f"key-{n}", json.dumps({"n": n})) for n in range(3)],
    )
    old.close()
    conn = connect(db)
    triggers = {
        name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    }
    assert triggers.isdisjoint({"outbox_enqueue", "outbox_added", "outbox_overflow"})
    collector = "SELECT pending, pending_bytes FROM outbox_sinks WHERE name = 'collector'"
    assert conn.execute(collector).fetchone()[0] == 3
    EventLog(conn).append([make_event(n) for n in range(3, 5)])
    # The three queued rows kept, the two new events after the sink's cursor.
    assert (
        conn.execute(collector).fetchone()
        == conn.execute("SELECT count(*), sum(length(CAST(body AS BLOB))) FROM events").fetchone()
    )
    assert conn.execute(collector).fetchone()[0] == 5
    conn.close()


def test_graph_events_pending_in_an_old_store_are_kept_by_the_rename(db: Path) -> None:
    """psg_outbox became psg_pending_events; what was waiting for the intake still waits."""
    old = store_at_version(db, database.MIGRATIONS.index(database._PENDING_GRAPH_EVENTS))
    waiting = [{"event_id": f"e-{n}", "event_family": "graph_update", "n": n} for n in range(3)]
    old.executemany(
        "INSERT INTO psg_outbox (event_id, kind, body) VALUES (?, ?, ?)",
        [(e["event_id"], e["event_family"], json.dumps(e)) for e in waiting],
    )
    old.close()
    conn = connect(db)
    assert pending.pending_events(conn) == waiting
    pending.clear(conn, ["e-0"])
    assert [e["event_id"] for e in pending.pending_events(conn)] == ["e-1", "e-2"]
    conn.close()


def test_a_store_of_the_previous_release_is_ordered_by_event_time_without_loss(db: Path) -> None:
    """Migration 14: the log is not rewritten; each row gets its own time, the timeline's
    hourly counts follow it, and reads in time order use the new index."""
    old = store_at_version(db, database.MIGRATIONS.index(database._EVENT_TIME))
    late = sample("git") | {"timestamp": "2030-01-01T10:00:00+02:00"}
    tool = sample("tool") | {"started_at": "2026-01-01T10:00:00Z"}
    tool.pop("completed_at", None)
    rows = [
        ("file_update", {"event_id": "a", "payload": {"timestamp": "2026-03-01T10:00:00Z"}}),
        ("git", {"event_id": "b", "payload": late}),
        ("tool", {"event_id": "c", "payload": tool}),
        ("graph_update", {"event_id": "d", "timestamp": "2026-06-01T00:00:00.000Z"}),
        ("file_update", {"event_id": "e"}),  # nothing to go by but the envelope's time
        ("file_update", "not JSON"),  # an older release's damage: kept, and still listed
    ]
    old.executemany(
        "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
        " VALUES (?, ?, ?, '2026-06-01T00:00:00.000Z', '2026-06-01T00:00:01.000Z', ?)",
        [
            (str(n), kind, f"key-{n}", body if isinstance(body, str) else json.dumps(body))
            for n, (kind, body) in enumerate(rows)
        ],
    )
    columns = "seq, event_id, kind, dedup_key, timestamp, received_at, body"
    before = old.execute(f"SELECT {columns} FROM events ORDER BY seq").fetchall()
    old.close()
    conn = connect(db)
    assert conn.execute(f"SELECT {columns} FROM events ORDER BY seq").fetchall() == before
    assert [r[0] for r in conn.execute("SELECT occurred_at FROM events ORDER BY seq")] == [
        "2026-03-01T10:00:00.000Z",
        "2030-01-01T08:00:00.000Z",
        "2026-01-01T10:00:00.000Z",
        "2026-06-01T00:00:00.000Z",
        "2026-06-01T00:00:00.000Z",
        "2026-06-01T00:00:00.000Z",
    ]
    hours = dict(conn.execute("SELECT hour || ' ' || kind, count FROM timeline_hours"))
    assert hours == {
        "2026-03-01T10 file_update": 1,
        "2030-01-01T08 git": 1,
        "2026-01-01T10 tool": 1,
        "2026-06-01T00 graph_update": 1,
        "2026-06-01T00 file_update": 2,
    }
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT seq FROM events WHERE occurred_at >= ? ORDER BY occurred_at, seq",
        ("2026",),
    ).fetchall()
    assert "events_time" in str(plan) and "TEMP B-TREE" not in str(plan)
    conn.close()


def test_minted_event_ids_skip_the_id_check_and_received_ones_do_not(
    conn: sqlite3.Connection,
) -> None:
    log = EventLog(conn)
    received = make_event(1, event_id="same")
    minted = NewEvent("mint", "file_update", "key-2", received.timestamp, {}, minted=True)
    assert log.append([received, minted])[1] is not None
    assert log.append([make_event(3, event_id="same")]) == [None]
    # A minted id is unique by construction (UUID v4); the store does not look it up.
    assert log.append([NewEvent("mint", "file_update", "key-4", "2026-03-02T08:00:00Z", {})])
    rows = conn.execute("SELECT event_id, minted FROM events ORDER BY seq").fetchall()
    assert rows == [("same", 0), ("mint", 1), ("mint", 0)]


def test_duplicate_event_id_is_none(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    log.append([make_event(1, event_id="same")])
    assert log.append([make_event(2, event_id="same")]) == [None]
    assert len(log.query()) == 1


def test_duplicates_inside_one_batch(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    results = log.append(
        [
            make_event(1, key="k"),
            make_event(2, key="k"),
            make_event(3, event_id="id-1"),
            make_event(4),
        ]
    )
    assert [r.event_id if r else None for r in results] == ["id-1", None, None, "id-4"]
    assert [e.seq for e in log.query()] == [1, 2]


def test_duplicates_are_recognised_after_reopening(db: Path) -> None:
    first = connect(db)
    EventLog(first).append([make_event(1)])
    first.close()
    second = connect(db)
    assert EventLog(second).append([make_event(1)]) == [None]
    second.close()


def test_bad_event_fails_the_whole_append(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    with pytest.raises(TypeError):
        log.append([make_event(1), make_event(2, thing=object())])
    with pytest.raises(ValueError):
        log.append([make_event(3, value=math.nan)])
    with pytest.raises(ValueError, match="timestamp"):
        log.append([make_event(4, timestamp="yesterday")])
    assert log.query() == []
    assert not conn.in_transaction


def test_timestamps_are_stored_canonical(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    [stored] = log.append([make_event(1, timestamp="2026-03-02T10:00:00+02:00")])
    assert stored is not None and stored.timestamp == "2026-03-02T08:00:00.000Z"
    assert stored.envelope["timestamp"] == "2026-03-02T10:00:00+02:00"  # the body is untouched
    [naive] = log.append([make_event(2, timestamp="2026-03-02T08:00:01.5")])
    assert naive is not None and naive.timestamp == "2026-03-02T08:00:01.500Z"


def test_query_filters(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    log.append(
        [
            make_event(1, kind="git_event", timestamp="2026-03-02T08:00:00.000Z"),
            make_event(2, kind="file_update", timestamp="2026-03-02T08:00:00.500Z"),
            make_event(3, kind="git_event", timestamp="2026-03-02T09:00:00.000Z"),
            make_event(4, kind="ci_event", timestamp="2026-03-02T07:00:00.000Z"),
        ]
    )

    def ids(events: list[StoredEvent]) -> list[str]:
        return [e.event_id for e in events]

    assert ids(log.query(kinds=["git_event"])) == ["id-1", "id-3"]
    assert ids(log.query(kinds={"git_event", "ci_event"})) == ["id-1", "id-3", "id-4"]
    assert log.query(kinds=[]) == []
    # Different spellings of the same instant compare as instants, not as strings.
    assert ids(log.query(since="2026-03-02T08:00:00Z")) == ["id-1", "id-2", "id-3"]
    assert ids(log.query(since="2026-03-02T10:00:00.400+02:00")) == ["id-2", "id-3"]
    assert ids(log.query(after_seq=2)) == ["id-3", "id-4"]
    assert ids(log.query(limit=2)) == ["id-1", "id-2"]
    assert log.query(limit=0) == []
    assert ids(log.query(kinds=["git_event"], since="2026-03-02T08:30:00Z")) == ["id-3"]
    assert ids(log.query(kinds=["git_event", "ci_event"], after_seq=1, limit=1)) == ["id-3"]
    with pytest.raises(TypeError):
        log.query(kinds="git_event")
    with pytest.raises(ValueError):
        log.query(limit=-1)


def test_counts_and_last_event(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    assert log.counts_by_kind() == {}
    assert log.last_event() is None
    log.append([make_event(1, kind="git_event"), make_event(2), make_event(3)])
    assert log.counts_by_kind() == {"file_update": 2, "git_event": 1}
    last = log.last_event()
    assert last is not None and last.seq == 3 and last.event_id == "id-3"


def test_counters(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    log.bump("rejected")
    log.bump("rejected", 4)
    log.bump("dropped", by=2)
    assert log.counters() == {"dropped": 2, "rejected": 5}
    with pytest.raises(RuntimeError), transaction(conn):
        log.bump("rejected", 100)
        raise RuntimeError("roll back")
    assert log.counters()["rejected"] == 5
    assert not conn.in_transaction


def test_meta(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    assert log.get_meta("graph_id") is None
    log.set_meta("graph_id", "g-1")
    log.set_meta("graph_id", "g-2")
    assert log.get_meta("graph_id") == "g-2"
    with pytest.raises(KeyError), transaction(conn):
        log.set_meta("graph_id", "g-3")
        raise KeyError("roll back")
    assert log.get_meta("graph_id") == "g-2"


def test_append_joins_an_open_transaction(conn: sqlite3.Connection) -> None:
    log = EventLog(conn)
    with pytest.raises(RuntimeError), transaction(conn):
        log.append([make_event(1)])
        log.bump("accepted")
        raise RuntimeError("roll back both")
    assert log.query() == [] and log.counters() == {}


# Small pools make repeats frequent: every event draws a dedup key, an event id, and whether
# the daemon minted that id (then it is not checked).
Draw = tuple[int, int, bool]
batches_strategy = st.lists(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 8), st.booleans()), min_size=1, max_size=6
    ),
    min_size=1,
    max_size=6,
)


def dedup_event(key: int, ident: int, minted: bool, position: int) -> NewEvent:
    return NewEvent(
        event_id=f"id-{ident}",
        kind="file_update",
        dedup_key=f"key-{key}",
        timestamp="2026-03-02T08:00:00.000Z",
        envelope={"key": key, "id": ident, "position": position},
        minted=minted,
    )


def dedup_model(batches: list[list[Draw]]) -> tuple[list[list[bool]], list[int]]:
    """Which events are fresh, and the positions stored, in first-seen order."""
    keys: set[int] = set()
    received_ids: set[int] = set()
    fresh: list[list[bool]] = []
    stored: list[int] = []
    position = 0
    for batch in batches:
        marks = []
        for key, ident, minted in batch:
            is_new = key not in keys and (minted or ident not in received_ids)
            if is_new:
                keys.add(key)
                if not minted:
                    received_ids.add(ident)
                stored.append(position)
            marks.append(is_new)
            position += 1
        fresh.append(marks)
    return fresh, stored


def numbered(batches: list[list[Draw]]) -> list[list[NewEvent]]:
    out, position = [], 0
    for batch in batches:
        events = []
        for key, ident, minted in batch:
            events.append(dedup_event(key, ident, minted, position))
            position += 1
        out.append(events)
    return out


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches_strategy)
def test_dedup_property_event_log(batches: list[list[Draw]]) -> None:
    fresh, stored = dedup_model(batches)
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "p.db")
        log = EventLog(conn)
        for events, marks in zip(numbered(batches), fresh, strict=True):
            results = log.append(events)
            assert [r is not None for r in results] == marks
        assert [e.envelope["position"] for e in log.query()] == stored
        assert [e.seq for e in log.query()] == list(range(1, len(stored) + 1))
        conn.close()


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches_strategy)
def test_dedup_property_concurrent_writer(batches: list[list[Draw]]) -> None:
    """Concurrent callers merged into one group still see first-come-first-stored."""
    fresh, stored = dedup_model(batches)

    async def scenario(path: Path) -> tuple[list[list[bool]], list[int]]:
        writer = StoreWriter(path)
        await writer.start()
        try:
            results = await asyncio.gather(*(writer.append(e) for e in numbered(batches)))
            positions = await writer.read(
                lambda c: [e.envelope["position"] for e in EventLog(c).query()]
            )
        finally:
            await writer.close()
        return [[r is not None for r in batch] for batch in results], positions

    with tempfile.TemporaryDirectory() as tmp:
        marks, positions = asyncio.run(scenario(Path(tmp) / "p.db"))
    assert marks == fresh
    assert positions == stored


# -- StoreWriter ---------------------------------------------------------------------------


@pytest.fixture
async def writer(db: Path) -> AsyncIterator[StoreWriter]:
    store = StoreWriter(db)
    await store.start()
    yield store
    await store.close()


async def test_sqlite_work_runs_on_the_writer_thread(writer: StoreWriter) -> None:
    name = await writer.read(lambda _: threading.current_thread().name)
    assert name.startswith("mplp-store")
    assert name != threading.current_thread().name


async def test_append_result_is_committed_when_it_returns(writer: StoreWriter, db: Path) -> None:
    [stored] = await writer.append([make_event(1)])
    assert stored is not None
    # A separate connection only sees committed data.
    reader = connect(db, read_only=True)
    assert [e.seq for e in EventLog(reader).query()] == [stored.seq]
    reader.close()


async def test_thousand_concurrent_appends_share_few_commits(writer: StoreWriter) -> None:
    def batch(caller: int) -> list[NewEvent]:
        return [make_event(caller * 10 + i) for i in range(caller % 3 + 1)]

    before = writer.commits
    results = await asyncio.gather(*(writer.append(batch(c)) for c in range(1000)))
    commits = writer.commits - before
    assert commits < 1000 // 10, f"{commits} transactions for 1000 calls"
    seqs: list[int] = []
    for caller, result in enumerate(results):
        assert [r.event_id for r in result if r] == [e.event_id for e in batch(caller)]
        seqs.extend(r.seq for r in result if r)
    total = sum(caller % 3 + 1 for caller in range(1000))
    assert sorted(seqs) == list(range(1, total + 1))
    assert await writer.read(lambda c: len(EventLog(c).query())) == total
    assert writer.pending_events == 0


async def test_a_callers_batch_is_never_split(db: Path) -> None:
    store = StoreWriter(db, max_batch=10)
    await store.start()
    try:
        before = store.commits
        results = await store.append([make_event(i) for i in range(25)])
        assert len(results) == 25 and all(results)
        assert store.commits - before == 1
        before = store.commits
        await asyncio.gather(*(store.append([make_event(100 + i)]) for i in range(100)))
        assert store.commits - before >= 10  # max_batch caps a group
    finally:
        await store.close()


async def test_failed_transaction_fails_its_group_only(writer: StoreWriter) -> None:
    armed = threading.Event()

    def disk(*_: object) -> int:
        if armed.is_set():
            raise OSError("simulated: disk full")
        return 0

    def install(conn: sqlite3.Connection) -> None:
        conn.create_function("disk_check", 0, disk)
        conn.execute(
            "CREATE TEMP TRIGGER disk_full BEFORE INSERT ON main.events"
            " WHEN disk_check() BEGIN SELECT 1; END"
        )

    await writer.run(install)
    armed.set()
    failed_before = writer.failed_transactions
    outcomes = await asyncio.gather(
        *(writer.append([make_event(i)]) for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(o, sqlite3.OperationalError) for o in outcomes), outcomes
    assert writer.failed_transactions == failed_before + 1  # one group, one rollback
    assert await writer.read(lambda c: EventLog(c).query()) == []
    armed.clear()
    later = await asyncio.gather(*(writer.append([make_event(i)]) for i in range(5)))
    assert all(r[0] is not None for r in later)
    assert await writer.read(lambda c: len(EventLog(c).query())) == 5


async def test_constraint_abort_in_a_trigger_rolls_back_the_group(writer: StoreWriter) -> None:
    await writer.run(
        lambda c: c.execute(
            "CREATE TEMP TRIGGER poison BEFORE INSERT ON main.events WHEN NEW.kind = 'poison'"
            " BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
        )
    )
    outcomes = await asyncio.gather(
        writer.append([make_event(1)]),
        writer.append([make_event(2, kind="poison")]),
        writer.append([make_event(3)]),
        return_exceptions=True,
    )
    assert all(isinstance(o, sqlite3.IntegrityError) for o in outcomes), outcomes
    assert await writer.read(lambda c: EventLog(c).query()) == []
    [stored] = await writer.append([make_event(4)])
    assert stored is not None


async def test_unserialisable_envelope_fails_only_its_caller(writer: StoreWriter) -> None:
    before = writer.commits
    outcomes = await asyncio.gather(
        writer.append([make_event(1)]),
        writer.append([make_event(2, thing=object())]),
        writer.append([make_event(3)]),
        return_exceptions=True,
    )
    good1, bad, good2 = outcomes
    assert isinstance(bad, TypeError)
    assert isinstance(good1, list) and isinstance(good2, list)
    assert writer.commits - before == 1
    ids = await writer.read(lambda c: [e.event_id for e in EventLog(c).query()])
    assert ids == ["id-1", "id-3"]


async def test_run_commits_or_rolls_back(writer: StoreWriter) -> None:
    def set_and_fail(conn: sqlite3.Connection) -> None:
        EventLog(conn).set_meta("k", "v")
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        await writer.run(set_and_fail)
    assert await writer.read(lambda c: EventLog(c).get_meta("k")) is None

    def set_and_answer(conn: sqlite3.Connection) -> int:
        EventLog(conn).set_meta("k", "w")
        return 42

    assert await writer.run(set_and_answer) == 42
    assert await writer.read(lambda c: (EventLog(c).get_meta("k"), c.in_transaction)) == (
        "w",
        False,
    )


async def test_cancelled_callers_do_not_disturb_others(writer: StoreWriter) -> None:
    gate = threading.Event()
    blocker = asyncio.ensure_future(writer.run(lambda _: gate.wait(30)))
    await asyncio.sleep(0)
    try:
        # The first call is handed to the (busy) writer thread; the rest queue behind it.
        handed = asyncio.ensure_future(writer.append([make_event(0)]))
        for _ in range(100):  # a couple of loop iterations until it is dispatched
            if writer._in_flight:
                break
            await asyncio.sleep(0)
        assert writer._in_flight
        queued = [asyncio.ensure_future(writer.append([make_event(i)])) for i in range(1, 6)]
        await asyncio.sleep(0)
        handed.cancel()
        queued[2].cancel()
    finally:
        gate.set()
    await blocker
    results = await asyncio.gather(*queued, return_exceptions=True)
    assert isinstance(results[2], asyncio.CancelledError)
    delivered = [r for i, r in enumerate(results) if i != 2]
    assert [r[0].event_id for r in delivered if isinstance(r, list) and r[0]] == [
        "id-1",
        "id-2",
        "id-4",
        "id-5",
    ]
    ids = await writer.read(lambda c: [e.event_id for e in EventLog(c).query()])
    # Cancelled after hand-off: may be (here: is) committed. Cancelled while queued: never.
    assert ids == ["id-0", "id-1", "id-2", "id-4", "id-5"]
    assert writer.pending_events == 0


async def test_close_drains_pending_appends(db: Path) -> None:
    store = StoreWriter(db, linger=3600)
    await store.start()
    await asyncio.gather(*(store.append([make_event(i)]) for i in range(50)))  # now contended
    tasks = [asyncio.ensure_future(store.append([make_event(100 + i)])) for i in range(10)]
    await asyncio.sleep(0)  # they are queued, waiting out the linger
    await asyncio.wait_for(store.close(), timeout=60)
    assert all(task.done() and task.result()[0] is not None for task in tasks)
    reader = connect(db, read_only=True)
    assert len(EventLog(reader).query()) == 60
    reader.close()


async def test_use_outside_the_open_state_raises(db: Path) -> None:
    store = StoreWriter(db)
    with pytest.raises(RuntimeError, match="start"):
        await store.append([make_event(1)])
    await store.start()
    await store.append([make_event(1)])
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await store.append([make_event(2)])
    with pytest.raises(RuntimeError, match="closed"):
        await store.run(lambda c: None)
    with pytest.raises(RuntimeError, match="closed"):
        await store.read(lambda c: None)
    with pytest.raises(RuntimeError):
        await store.start()


async def test_concurrent_close_calls_all_wait(db: Path) -> None:
    store = StoreWriter(db)
    await store.start()
    pending = asyncio.ensure_future(store.append([make_event(1)]))
    await asyncio.sleep(0)
    await asyncio.gather(store.close(), store.close(), store.close())
    assert pending.done() and pending.result()[0] is not None


async def test_writer_results_match_what_is_stored(writer: StoreWriter) -> None:
    results = await writer.append([make_event(1, note="é"), make_event(2)])
    assert await writer.read(lambda c: EventLog(c).query()) == results


CRASH_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from mplp_lsp.store import NewEvent, StoreWriter

    async def main():
        writer = StoreWriter(Path(sys.argv[1]))
        await writer.start()
        print("ready", flush=True)

        async def producer(p):
            i = 0
            while True:
                size = 1 + (i % 3)
                events = [
                    NewEvent(f"{p}-{i}-{j}", "file_update", f"k-{p}-{i}-{j}",
                             "2026-03-02T08:00:00.000Z",
                             {"event_id": f"{p}-{i}-{j}", "pad": "x" * 300})
                    for j in range(size)
                ]
                for stored in await writer.append(events):
                    print(stored.seq, stored.event_id, flush=True)
                i += 1

        await asyncio.gather(*(producer(p) for p in range(4)))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("iteration", range(5))
def test_acknowledged_events_survive_sigkill(tmp_path: Path, iteration: int) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    db = tmp_path / "events.db"
    child = subprocess.Popen(
        [sys.executable, "-c", CRASH_CHILD, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    acknowledged: dict[int, str] = {}
    assert child.stdout is not None and child.stderr is not None
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        kill_after = rng.randrange(1, 400)
        while len(acknowledged) < kill_after:
            line = child.stdout.readline()
            assert line, f"writer died early: {child.stderr.read()}"
            seq, event_id = line.split()
            acknowledged[int(seq)] = event_id
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=60)
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL

    conn = connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = dict(conn.execute("SELECT seq, event_id FROM events").fetchall())
    missing = {seq: eid for seq, eid in acknowledged.items() if stored.get(seq) != eid}
    assert not missing, f"seed {seed}: acknowledged but lost: {missing}"
    conn.close()


# -- integration error log -----------------------------------------------------------------


def test_error_log_lines_are_json(tmp_path: Path) -> None:
    log = IntegrationErrorLog(tmp_path / "integration-errors.jsonl")
    log.write({"code": "schema", "detail": "bad ✓", "source": "http"})
    log.write({"code": "invariant", "value": object()})  # odd values are written as repr
    lines = (tmp_path / "integration-errors.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert UTC_MS.fullmatch(first["time"]) and next(iter(first)) == "time"
    assert first["detail"] == "bad ✓" and "bad ✓" in lines[0]
    assert second["value"].startswith("<object")
    assert "\n" not in lines[0] and ", " not in lines[0]
    assert log.read() == [first, second]
    assert log.read(limit=1) == [second]
    assert log.failures == 0 and log.written == 2
    assert (tmp_path / "integration-errors.jsonl").stat().st_mode & 0o777 == 0o600
    log.close()


def test_error_log_rotation_keeps_n_files(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    log = IntegrationErrorLog(path, max_bytes=300, keep=2)
    for n in range(60):
        log.write({"n": n, "pad": "p" * 40})
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["x.jsonl", "x.jsonl.1", "x.jsonl.2"]
    for name in names:
        assert (tmp_path / name).stat().st_size <= 300
    numbers = [record["n"] for record in log.read()]
    assert numbers == list(range(numbers[0], 60))  # newest last, nothing missing in between
    assert numbers[0] > 0  # the oldest were rotated away


def test_error_log_keep_zero_keeps_only_the_live_file(tmp_path: Path) -> None:
    log = IntegrationErrorLog(tmp_path / "x.jsonl", max_bytes=100, keep=0)
    for n in range(20):
        log.write({"n": n, "pad": "p" * 30})
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == ["x.jsonl"]
    assert log.read()[-1]["n"] == 19


def test_error_log_never_raises_on_unwritable_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file where a directory should be")
    log = IntegrationErrorLog(blocker / "integration-errors.jsonl")
    with caplog.at_level(logging.WARNING, logger="mplp_lsp.store.errorlog"):
        for _ in range(3):
            log.write({"code": "schema"})
    assert log.failures == 3
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert log.read() == []


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores directory permissions; the regular-file parent case covers it",
)
def test_error_log_never_raises_in_read_only_dir(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        log = IntegrationErrorLog(locked / "integration-errors.jsonl")
        log.write({"code": "schema"})
        assert log.failures == 1
    finally:
        locked.chmod(0o700)


def test_error_log_counts_unencodable_records(tmp_path: Path) -> None:
    log = IntegrationErrorLog(tmp_path / "x.jsonl")
    circular: dict[str, Any] = {}
    circular["self"] = circular
    log.write({"detail": circular})
    assert log.failures == 1
    log.write({"code": "fine"})
    assert [r["code"] for r in log.read()] == ["fine"]


def test_error_log_is_thread_safe(tmp_path: Path) -> None:
    log = IntegrationErrorLog(tmp_path / "x.jsonl", max_bytes=20_000, keep=50)

    def work(worker: int) -> None:
        for n in range(200):
            log.write({"worker": worker, "n": n, "pad": "q" * 20})

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = log.read()
    assert len(records) == 1600 and log.failures == 0
    for worker in range(8):
        assert [r["n"] for r in records if r["worker"] == worker] == list(range(200))


async def test_an_append_that_meets_damage_is_retried_on_the_salvaged_store(
    db: Path, writer: StoreWriter
) -> None:
    assert all(await writer.append([make_event(n) for n in range(1, 501)]))
    await writer.read(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    with db.open("r+b") as handle:  # every page but the first (the schema) zeroed
        handle.seek(4096)
        handle.write(bytes(db.stat().st_size - 4096))
    await writer.read(lambda c: c.execute("PRAGMA shrink_memory"))  # as memory pressure would
    generation = writer.generation
    results = await writer.append([make_event(1000)])
    assert results[0] is not None and results[0].event_id == "id-1000"  # not an error
    assert writer.generation == generation + 1
    assert [e.event_id for e in await writer.read(lambda c: EventLog(c).query())][-1] == "id-1000"
    (quarantine,) = db.parent.glob("corrupt-*")
    assert (quarantine / db.name).is_file()


async def test_damage_that_sqlite_does_not_confirm_is_not_salvaged(writer: StoreWriter) -> None:
    def fails_as_damaged(conn: sqlite3.Connection) -> None:
        error = sqlite3.DatabaseError("database disk image is malformed")
        error.sqlite_errorcode = sqlite3.SQLITE_CORRUPT
        raise error

    with pytest.raises(sqlite3.DatabaseError):
        await writer.run(fails_as_damaged)
    assert writer.generation == 0  # quick_check found the file sound: nothing moved aside
    assert not list(writer.path.parent.glob("corrupt-*"))
    assert await writer.append([make_event(1)])  # and the writer still works

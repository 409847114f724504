"""The SQLite collector's schema is versioned too: applied once, adopted from before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mplp_lsp.collector.store import MIGRATIONS, CollectorStore


def test_a_new_database_gets_every_migration_once(tmp_path: Path) -> None:
    CollectorStore(tmp_path / "c.db").close()
    CollectorStore(tmp_path / "c.db").close()
    conn = sqlite3.connect(tmp_path / "c.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_a_database_from_before_versioning_is_adopted(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.db")
    conn.execute(
        "CREATE TABLE received (id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
        " event_id TEXT NOT NULL, stream TEXT NOT NULL, seq INTEGER NOT NULL,"
        " received_at TEXT NOT NULL, body TEXT NOT NULL, UNIQUE (source, event_id))"
    )
    conn.execute("INSERT INTO received VALUES (1, 's', 'e', 'st', 1, 't', '{}')")
    conn.commit()
    conn.close()
    store = CollectorStore(tmp_path / "old.db")
    assert store.stats()["stored"] == 1
    store.close()
    conn = sqlite3.connect(tmp_path / "old.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_copies_of_one_event_under_other_sources_are_removed_keeping_the_first(
    tmp_path: Path,
) -> None:
    """Before migration 3 an event was stored once per (source, event_id): a re-stream
    under another envelope source stored it again. The upgrade keeps the first received
    (its id, so page cursors stay valid) and counts the others as duplicates."""
    CollectorStore(tmp_path / "c.db").close()
    conn = sqlite3.connect(tmp_path / "c.db")
    conn.execute("PRAGMA user_version = 2")
    conn.execute("DROP TABLE received")
    conn.execute(
        "CREATE TABLE received (id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
        " event_id TEXT NOT NULL, stream TEXT NOT NULL, seq INTEGER NOT NULL,"
        " received_at TEXT NOT NULL, body TEXT NOT NULL, UNIQUE (source, event_id))"
    )
    conn.executemany(
        "INSERT INTO received VALUES (?, ?, ?, ?, 1, 't', '{}')",
        [(1, "a", "E", "old"), (2, "b", "E", "new"), (3, "a", "F", "old"), (4, "c", "e", "x")],
    )
    conn.execute("INSERT INTO stats VALUES ('duplicates', 5)")
    conn.commit()
    conn.close()
    store = CollectorStore(tmp_path / "c.db")
    try:
        kept = [(e["id"], e["source"], e["event_id"]) for e in store.events()]
        stats = store.stats()
    finally:
        store.close()
    assert kept == [(1, "a", "E"), (3, "a", "F")]  # "e" is "E": an id's case does not matter
    assert stats["stored"] == 2 and stats["duplicates"] == 5 + 2

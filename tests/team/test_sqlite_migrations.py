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

"""Stores as an older mplp-lsp left them, for migration tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mplp_lsp.store.database import MIGRATIONS, register_functions, split_script


def store_at_version(path: Path, version: int) -> sqlite3.Connection:
    """A store at schema ``version`` (its first ``version`` migrations), left open."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    register_functions(conn)
    for script in MIGRATIONS[:version]:
        for statement in split_script(script):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    return conn

"""Read access to a workspace's store from the command line (the daemon may be running)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mplp_lsp.statedir import StatePaths, resolve_state_dir
from mplp_lsp.store.database import SCHEMA_VERSION, connect, schema_version


def state_paths(workspace: Path, state_dir: str | None) -> StatePaths:
    return StatePaths(resolve_state_dir(workspace, state_dir))


def open_read_only(paths: StatePaths) -> sqlite3.Connection | None:
    """None when nothing was ever recorded for this workspace.

    A store behind this version's schema is brought up to date first: either another
    process is creating it right now (the file exists before its tables do, and each
    migration commits on its own), or an older mplp-lsp wrote it. Migrating takes the write
    lock and re-checks the version under it, so it is safe beside a running daemon.
    """
    if not paths.database.exists():
        return None
    conn = connect(paths.database, read_only=True)
    if schema_version(conn) < SCHEMA_VERSION:
        conn.close()
        connect(paths.database).close()
        conn = connect(paths.database, read_only=True)
    return conn


def open_for_writing(paths: StatePaths) -> sqlite3.Connection | None:
    """None when nothing was ever recorded for this workspace; never creates a store.

    For small edits beside a running daemon: every write is one ``BEGIN IMMEDIATE``
    transaction, which waits for the daemon's writer (busy_timeout) instead of failing, and
    WAL lets the daemon's readers go on meanwhile. The state dir's lock is not taken: a
    daemon starting at that moment would refuse to open the store.
    """
    if not paths.database.exists():
        return None
    return connect(paths.database)

"""Read access to a workspace's store from the command line (the daemon may be running).

The command line writes a store only through its owner (:mod:`mplp_lsp.engine.handoff`).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from mplp_lsp.engine.statedir import StateDirLock, StatePaths, locate_state_dir
from mplp_lsp.store.database import SCHEMA_VERSION, connect, schema_version

# How long a reader waits for the store's owner to bring the schema up to date.
_OWNER_MIGRATES = 10.0


def state_paths(workspace: Path, state_dir: str | None) -> StatePaths:
    """Where the workspace's store lives; nothing is created (the command line reads)."""
    return StatePaths(locate_state_dir(workspace, state_dir))


def open_read_only(paths: StatePaths) -> sqlite3.Connection | None:
    """None when nothing was ever recorded for this workspace.

    A store behind this version's schema (an older mplp-lsp wrote it, or its owner is
    creating it right now: the file exists before its tables do) is brought up to date by
    whoever owns it: this process, under the state dir's lock, when it is free; otherwise
    the owner, who migrates at open, and this waits a moment for it.
    """
    if not paths.database.exists():
        return None
    conn = connect(paths.database, read_only=True)
    if schema_version(conn) >= SCHEMA_VERSION:
        return conn
    conn.close()
    lock = StateDirLock(paths.lock)
    if lock.acquire():
        try:
            connect(paths.database).close()
        finally:
            lock.release()
    else:
        deadline = time.monotonic() + _OWNER_MIGRATES
        while time.monotonic() < deadline and _behind(paths.database):
            time.sleep(0.05)
    return connect(paths.database, read_only=True)


def _behind(database: Path) -> bool:
    conn = connect(database, read_only=True)
    try:
        return schema_version(conn) < SCHEMA_VERSION
    finally:
        conn.close()

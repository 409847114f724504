"""Read access to a workspace's store from the command line (the daemon may be running)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mplp_lsp.statedir import StatePaths, resolve_state_dir
from mplp_lsp.store.database import connect


def state_paths(workspace: Path, state_dir: str | None) -> StatePaths:
    return StatePaths(resolve_state_dir(workspace, state_dir))


def open_read_only(paths: StatePaths) -> sqlite3.Connection | None:
    """None when nothing was ever recorded for this workspace."""
    if not paths.database.exists():
        return None
    return connect(paths.database, read_only=True)

"""Reading every byte a store holds, to look for a secret that should have been redacted."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path


def read_db(path: Path, *, tables: tuple[str, ...] | None = None) -> bytes:
    """Every value of the named tables (default: all), as bytes."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        chunks = []
        for table in names:
            if tables is not None and table not in tables:
                continue
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                chunks.append(repr(row).encode())
        return b"\n".join(chunks)
    finally:
        conn.close()


# Where events live (the forwarder's queues hold event ids and bodies). The PSG's own tables
# mirror the workspace and the repository (a branch's real name, a file's real path) and are
# never forwarded; the snapshot table holds file bytes by design.
EVENT_TABLES = ("events", "outbox", "outbox_dead", "psg_pending_events")


def read_all(state: Path, pattern: str) -> bytes:
    return b"".join(path.read_bytes() for path in state.glob(pattern))


CLI = str(Path(sys.executable).with_name("mplp-lsp"))


def debug_watch(
    workspace: Path, state: Path, remote: str, log_file: Path, token: str, **env: str
) -> subprocess.Popen[bytes]:
    """A real ``mplp-lsp watch`` forwarding to ``remote``, its debug log in ``log_file``;
    returns once it watches. ``env`` adds to the environment (a PATH, say)."""
    environment = {**os.environ, "MPLP_LSP_REMOTE_TOKEN": token, **env}
    environment.pop("MPLP_LSP_STATE_DIR", None)
    watch = subprocess.Popen(
        [CLI, "watch", str(workspace), "--state-dir", str(state), "--remote", remote,
         "--log-level", "debug", "--log-file", str(log_file)],
        env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert watch.stderr is not None
    assert b"watching" in watch.stderr.readline()
    return watch

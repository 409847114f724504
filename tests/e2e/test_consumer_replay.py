"""kill -9 between an event's commit and its graph consumer, then a restart: the graph
catches up from the event log (each consumer keeps its position in the store)."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

from mplp_lsp.engine.handoff import deliver
from mplp_lsp.engine.intake import Submission
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from tests.e2e.harness import server_env

BURST = 5_000


def count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:  # not created (or migrated) yet
        return 0
    finally:
        conn.close()


LOGGED = "SELECT count(*) FROM events WHERE kind = 'file_update'"
GRAPHED = "SELECT count(*) FROM psg_files"


async def start_daemon(ws: Path, state: Path) -> asyncio.subprocess.Process:
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mplp_lsp", "watch", str(ws), "--state-dir", str(state),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=server_env(),
    )  # fmt: skip
    assert daemon.stderr is not None
    await asyncio.wait_for(daemon.stderr.readline(), 60)  # "watching ...": it owns the store
    return daemon


async def test_kill_between_commit_and_consumer_then_the_graph_catches_up(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    db = state / "events.db"
    daemon = await start_daemon(ws, state)
    stamp = utc_timestamp()
    burst = [
        Submission(
            Kind.FILE_UPDATE,
            {"file_path": f"gone/f{i}.txt", "change_type": "created", "timestamp": stamp},
            "test",
        )
        for i in range(BURST)
    ]
    # The daemon owns the store: the burst goes to its inbox as one spool file, and it
    # commits it in one go; the graph consumer runs once the intake is quiet.
    deliver(ws, state, burst)
    deadline = time.monotonic() + 120
    while count(db, LOGGED) < BURST and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    os.kill(daemon.pid, signal.SIGKILL)
    await daemon.wait()
    assert count(db, LOGGED) == BURST
    behind = count(db, GRAPHED)
    assert behind < BURST, "the consumer finished before the kill: nothing to show"
    daemon = await start_daemon(ws, state)
    try:
        deadline = time.monotonic() + 60
        while count(db, GRAPHED) < BURST and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert count(db, GRAPHED) == BURST, f"graph {count(db, GRAPHED)} of {BURST} (was {behind})"
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            logged = {
                row[0]
                for row in conn.execute(
                    "SELECT json_extract(body, '$.payload.file_path') FROM events"
                    " WHERE kind = 'file_update'"
                )
            }
            graphed = {row[0] for row in conn.execute("SELECT path FROM psg_files")}
        finally:
            conn.close()
        assert graphed == logged
    finally:
        daemon.terminate()
        await daemon.wait()

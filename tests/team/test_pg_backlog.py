"""A daemon's forwarder reports its backlog with each batch; the collector shows it per stream.

Real processes throughout: ``mplp-lsp watch --remote`` queues a burst of file events while
nothing listens at its remote, then is restarted once a PostgreSQL collector listens there.
The second batch is held in its transaction (a row it updates is locked by the test), so
what the first batch reported can be read from ``GET /streams`` before the drain goes on.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mplp_lsp.forward.outbox import STREAM_META_KEY
from tests import postgres
from tests.support.team import get, instant
from tests.support.waiting import wait_until_async
from tests.team.conftest import TOKEN, start_collector

pytestmark = pytest.mark.e2e

FILES = 2500
BATCH = 1000  # the daemon's default forwardBatchSize


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def store_rows(state: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(state / "events.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def stream_row(url: str, stream: str) -> dict[str, Any] | None:
    status, answer = await get(url, "/streams")
    assert status == 200
    return next((s for s in answer["streams"] if s["stream"] == stream), None)


async def test_the_backlog_behind_each_batch_is_shown_per_stream(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.daemon import start_watch, stop, wait_for_api

    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    port = free_port()
    remote = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)
    queuing = await start_watch(workspace, state, "--remote", remote)
    try:
        await wait_for_api(state, workspace)
        for n in range(FILES):
            (workspace / f"f{n:04d}.txt").write_text(f"content {n}\n")
        last = -1

        async def queued_and_quiet() -> bool:
            nonlocal last
            pending: int = store_rows(
                state, "SELECT pending FROM outbox_sinks WHERE name = 'collector'"
            )[0][0]
            settled = pending >= FILES and pending == last
            last = pending
            return settled

        await wait_until_async(queued_and_quiet)
    finally:
        await stop(queuing)

    ((stream,),) = store_rows(state, f"SELECT value FROM meta WHERE key = '{STREAM_META_KEY}'")
    queued = store_rows(
        state,
        # The collector sink's queue: its rows and the events after its cursor.
        "SELECT e.seq, e.received_at, e.body FROM events AS e, outbox_sinks AS s"
        " WHERE s.name = 'collector' AND (e.seq > s.cursor"
        " OR e.seq IN (SELECT seq FROM outbox WHERE sink = s.id)) ORDER BY e.seq",
    )
    first_paths = {json.loads(body)["payload"].get("file_path") for _, _, body in queued[:BATCH]}
    held_path = next(
        path
        for _, _, body in queued[BATCH : 2 * BATCH]
        if (path := json.loads(body)["payload"].get("file_path")) not in first_paths
    )

    collector = start_collector(pg_url, pg_cluster, tmp_path, port=port)
    conninfo = pg_cluster.psql_url(pg_url.rsplit("/", 1)[1])
    daemon: asyncio.subprocess.Process | None = None
    try:
        with psycopg.connect(conninfo) as locker:
            locker.execute(
                "INSERT INTO team_files VALUES (%s, %s, true, 'created', '2000-01-01Z', '')",
                (stream, held_path),
            )
            locker.commit()
            # The second batch updates this file's row: it waits inside its transaction.
            locker.execute(
                "SELECT 1 FROM team_files WHERE stream = %s AND path = %s FOR UPDATE",
                (stream, held_path),
            )
            daemon = await start_watch(workspace, state, "--remote", remote)

            async def first_batch_in() -> bool:
                row = await stream_row(collector.url, stream)
                return row is not None and row["batches"] > 0

            await wait_until_async(first_batch_in)
            row = await stream_row(collector.url, stream)
            assert row is not None and row["batches"] == 1
            assert row["backlog"] == len(queued) - BATCH
            assert instant(row["backlog_oldest"]) == instant(queued[BATCH][1])
            locker.rollback()

        async def drained() -> bool:
            row = await stream_row(collector.url, stream)
            return row is not None and row["accepted"] >= len(queued)

        await wait_until_async(drained)
        row = await stream_row(collector.url, stream)
        assert row is not None
        assert row["backlog"] == 0 and row["backlog_oldest"] is None
    finally:
        if daemon is not None:
            await stop(daemon)
        collector.stop()

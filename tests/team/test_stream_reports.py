"""What ``GET /streams`` says of a daemon's backlog is its outbox, even when no batch gets through.

A real ``watch`` daemon forwards through a proxy that cuts every request larger than
16 KiB (as a proxy with a small body limit, or a link that drops long transfers, does):
its batches never arrive and wait in its outbox, retried with backoff. Its stream reports
are small and pass, so within one report period the collector shows the outbox's depth
and oldest entry as the daemon's own status gives them, with the time of the report. A
batch re-sent with the same Idempotency-Key is counted as a replay of its stream.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.support.team import batch, envelope, get, instant, post
from tests.support.waiting import wait_until_async
from tests.team.conftest import TOKEN, start_collector

pytestmark = pytest.mark.e2e

REPORT_S = 1  # forwardReportS for the daemon: one report period
LIMIT = 16 * 1024


class CuttingProxy:
    """Forwards requests to ``upstream``; a request with a body over ``LIMIT`` has its
    connection cut instead (no HTTP answer at all)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.cut = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._session = aiohttp.ClientSession()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if len(body) > LIMIT:
            self.cut += 1
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as answer:
            return web.Response(
                body=await answer.read(),
                status=answer.status,
                content_type=answer.content_type,
            )

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()


async def daemon_forwarding(state: Path, workspace: Path) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mplp_lsp",
        "status",
        "--json",
        "--state-dir",
        str(state),
        "--workspace",
        str(workspace),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err
    forward = json.loads(out)["forward"]
    assert forward is not None
    return dict(forward)


async def settled_depth(state: Path, workspace: Path) -> int:
    """The daemon's outbox depth once it holds still (the files are recorded, and what a
    small batch could bring through is gone), with batches failing."""
    last = -1
    while True:
        forward = await daemon_forwarding(state, workspace)
        if forward["depth"] > 0 and forward["depth"] == last and forward["consecutive_failures"]:
            return last
        last = forward["depth"]
        await asyncio.sleep(1.0)


async def backlog_shown(url: str, stream: str | None, depth: int) -> bool:
    _, answer = await get(url, "/streams")
    mine = [s for s in answer["streams"] if s["stream"] == stream]
    return bool(mine) and mine[0]["backlog"] == depth


def oldest_queued(state: Path) -> str:
    """When the oldest entry of the daemon's outbox was stored (read beside the daemon)."""
    conn = sqlite3.connect(state / "events.db")
    try:
        row = conn.execute(
            "SELECT e.received_at FROM events AS e, outbox_sinks AS s"
            " WHERE s.name = 'collector' AND (e.seq > s.cursor"
            " OR e.seq IN (SELECT seq FROM outbox WHERE sink = s.id)) ORDER BY e.seq LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    return str(row[0])


async def test_the_backlog_shown_is_the_outbox_while_no_batch_gets_through(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.daemon import start_watch, stop, wait_for_api
    from tests.support.team import stream_of

    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    proxy = CuttingProxy(collector.url)
    remote = await proxy.start()
    daemon = await start_watch(
        workspace, state, "--remote", remote, "--set", f"forwardReportS={REPORT_S}"
    )
    try:
        await wait_for_api(state, workspace)
        stream = stream_of(state)
        for wave in range(2):  # the backlog follows the outbox as it grows
            for n in range(150):
                (workspace / f"w{wave}-{n:03d}.txt").write_text(f"{n}\n" * 20)
            depth = await settled_depth(state, workspace)
            settled_at = time.time()
            shown = partial(backlog_shown, collector.url, stream, depth)
            await wait_until_async(shown, timeout=REPORT_S * 10)
            _, answer = await get(collector.url, "/streams")
            [row] = [s for s in answer["streams"] if s["stream"] == stream]
            assert instant(row["backlog_oldest"]) == instant(oldest_queued(state))
            # Reported after the outbox settled: the figure is the outbox now, not an
            # older one kept from before.
            assert instant(row["backlog_reported_at"]).timestamp() >= settled_at - REPORT_S
    finally:
        await stop(daemon)
        await proxy.stop()
        collector.stop()
    assert proxy.cut > 0


async def test_a_replayed_batch_is_counted_on_its_stream(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    try:
        body = batch("retrying", [envelope(Kind.FILE_UPDATE, "file_update")])
        for _ in range(3):  # the first answer is lost on the way: sent twice more
            assert (await post(collector.url, body, **{"Idempotency-Key": "k"}))[0] == 200
        _, answer = await get(collector.url, "/streams")
        _, stats = await get(collector.url, "/stats")
    finally:
        collector.stop()
    [row] = answer["streams"]
    assert (row["batches"], row["accepted"], row["replayed"]) == (1, 1, 2)
    assert stats["replayed_batches"] == 2

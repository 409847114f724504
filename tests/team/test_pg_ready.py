"""Liveness, readiness and recovery of a collector instance around its real PostgreSQL.

Each test has a cluster of its own, stopped (``pg_ctl -m immediate``: a crash) and started
again on the same port while a ``collector serve`` process runs, and asks it over HTTP as a
balancer and a forwarder would: ``/health`` (the process serves), ``/ready`` (the database
takes writes now) and ``POST /events``. The bounds asserted are the documented ones
(docs/team.md): ``/ready`` turns 503 within 2 s of the database going away, the instance
serves within 5 s of its return, and no request waits longer than the database timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.support.team import batch, envelope
from tests.team.conftest import TOKEN, start_collector, throwaway_cluster

pytestmark = pytest.mark.e2e

READY_WITHIN_S = 2.0  # docs/team.md: /ready answers 503 within 2 s of losing the database
SERVES_WITHIN_S = 5.0  # and the instance serves within 5 s of its return
DB_TIMEOUT_S = 2.0  # --db-timeout given here: no request waits longer (plus HTTP's own)


@pytest.fixture
def cluster() -> Iterator[postgres.Cluster]:
    """A cluster of this test's own: it is stopped and started again."""
    yield from throwaway_cluster()


async def probe(url: str, path: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"{url}{path}") as answer:
        return answer.status


async def post_batch(url: str, stream: str) -> tuple[int, float]:
    """One small batch; its status and how long the answer took."""
    body = batch(stream, [envelope(Kind.FILE_UPDATE, "file_update")])
    began = time.monotonic()
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session,
        session.post(
            f"{url}/events", data=body, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as answer,
    ):
        await answer.read()
        return answer.status, time.monotonic() - began


async def until_status(url: str, path: str, status: int, limit: float) -> float:
    """Seconds until ``path`` answers ``status``; fails past ``limit``."""
    began = time.monotonic()
    while (await probe(url, path)) != status:
        waited = time.monotonic() - began
        assert waited < limit, f"{path} did not answer {status} within {limit} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - began


async def until_accepted(url: str, limit: float) -> tuple[float, list[float]]:
    """Seconds until a batch is accepted, and how long each refused attempt waited."""
    began = time.monotonic()
    waits: list[float] = []
    while True:
        status, took = await post_batch(url, "recovery")
        if status == 200:
            return time.monotonic() - began, waits
        assert status == 503, status
        waits.append(took)
        assert time.monotonic() - began < limit, f"no batch accepted within {limit} s"
        await asyncio.sleep(0.05)


async def test_ready_follows_the_database_and_the_instance_serves_soon_after_it_returns(
    cluster: postgres.Cluster, tmp_path: Path
) -> None:
    url = cluster.create_database("ready")
    collector = start_collector(url, cluster, tmp_path, "--db-timeout", str(DB_TIMEOUT_S))
    try:
        assert (await post_batch(collector.url, "before"))[0] == 200
        for outage in (1.0, 12.0):  # a blip, and long enough for reconnection backoff
            cluster.halt()
            went = await until_status(collector.url, "/ready", 503, READY_WITHIN_S + 3)
            assert went <= READY_WITHIN_S, f"/ready still 200 {went:.1f} s after the loss"
            assert await probe(collector.url, "/health") == 200  # alive: do not restart it
            refused = [await post_batch(collector.url, "during") for _ in range(3)]
            assert {status for status, _ in refused} == {503}
            assert max(took for _, took in refused) <= DB_TIMEOUT_S + 1
            await asyncio.sleep(outage)
            cluster.resume()
            back, waits = await until_accepted(collector.url, SERVES_WITHIN_S + 10)
            assert back <= SERVES_WITHIN_S, f"served {back:.1f} s after the database returned"
            assert all(took <= DB_TIMEOUT_S + 1 for took in waits), waits
            assert await probe(collector.url, "/ready") == 200
    finally:
        collector.stop()
    assert collector.process.stderr is not None
    logged = collector.process.stderr.read()
    assert "Traceback" not in logged
    # One line when the database goes and one when it returns, not one per request.
    assert logged.count("the database is unavailable") == 2, logged
    assert logged.count("the database is available again") == 2, logged


async def test_an_instance_started_before_its_database_serves_once_it_is_up(
    cluster: postgres.Cluster, tmp_path: Path
) -> None:
    url = cluster.create_database("later")
    cluster.halt()
    collector = start_collector(url, cluster, tmp_path, ready=False)
    try:
        assert await probe(collector.url, "/health") == 200
        assert await probe(collector.url, "/ready") == 503
        status, took = await post_batch(collector.url, "early")
        assert status == 503 and took <= DB_TIMEOUT_S + 1
        await asyncio.sleep(3)  # several connection attempts fail meanwhile
        assert collector.process.poll() is None, "the instance gave up"
        cluster.resume()
        back, _ = await until_accepted(collector.url, SERVES_WITHIN_S + 10)
        assert back <= SERVES_WITHIN_S
        assert await probe(collector.url, "/ready") == 200
        answer: Any
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{collector.url}/stats", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as r,
        ):
            answer = await r.json()
        assert answer["accepted"] == 1
    finally:
        collector.stop()


class Stall:
    """A TCP relay to PostgreSQL that can stop passing bytes (``hold``) and go on again
    (``release``): a link that stops answering without closing, as a network partition
    does; nothing is lost, as TCP retransmits once the path is back."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.flowing.wait()
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    def hold(self) -> None:
        self.flowing.clear()

    def release(self) -> None:
        self.flowing.set()

    async def stop(self) -> None:
        assert self.server is not None
        self.flowing.set()
        self.server.close()


async def test_a_database_that_stops_answering_is_not_waited_for(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    stall = Stall(pg_cluster.port)
    port = await stall.start()
    through = pg_url.replace(f":{pg_cluster.port}/", f":{port}/")
    collector = await asyncio.to_thread(
        start_collector, through, pg_cluster, tmp_path, "--db-timeout", str(DB_TIMEOUT_S)
    )
    try:
        assert (await post_batch(collector.url, "before"))[0] == 200
        stall.hold()
        pending = asyncio.ensure_future(post_batch(collector.url, "in-flight"))
        went = await until_status(collector.url, "/ready", 503, READY_WITHIN_S + 3)
        assert went <= READY_WITHIN_S
        status, took = await pending  # the request on the stalled link is not held up
        assert status == 503 and took <= READY_WITHIN_S + 1
        status, took = await post_batch(collector.url, "during")
        assert status == 503 and took <= DB_TIMEOUT_S + 1
        await asyncio.sleep(3)
        stall.release()
        back, _ = await until_accepted(collector.url, SERVES_WITHIN_S + 10)
        assert back <= SERVES_WITHIN_S
    finally:
        await asyncio.to_thread(collector.stop)
        await stall.stop()

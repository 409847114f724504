"""Forwarding against real HTTP servers on 127.0.0.1: the collector process, or a scripted one.

Processes are killed with SIGKILL for the crash cases; store files are damaged on disk for
the corruption cases. Retry delays are shortened through the settings, never mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from mplp_lsp.forward import outbox
from mplp_lsp.forward.forwarder import Forwarder
from mplp_lsp.forward.sender import HttpTransport
from mplp_lsp.forward.sinks.collector import CollectorSink
from mplp_lsp.store import EventLog, StoreWriter, connect
from mplp_lsp.store.database import BUSY_TIMEOUT_MS
from tests.support.collector import TOKEN, Collector, child_env, free_port
from tests.support.daemon import cli, start_watch, stop, wait_for_api
from tests.support.forwarding import (
    accepted_ids,
    collector_sink,
    drained,
    new_event,
    open_workspace,
    submissions,
    truncate,
)
from tests.support.waiting import wait_until_async

PRODUCER = Path(__file__).with_name("forward_producer.py")


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    running = Collector(tmp_path / "collector.db")
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def remote_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)


# -- a scripted remote ---------------------------------------------------------------------


class Scripted:
    """Answers each POST with ``respond(request_number, items)``; records what it stored."""

    def __init__(self, respond: Callable[[int, list[dict[str, Any]]], tuple[int, dict[str, str]]]):
        self.respond = respond
        self.arrivals: list[tuple[float, int]] = []  # (wall clock, items)
        self.stored: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        assert request.headers["Idempotency-Key"]
        items = (await request.json())["items"]
        self.arrivals.append((time.time(), len(items)))
        status, headers = self.respond(len(self.arrivals), items)
        if 200 <= status < 300:
            self.stored += items
        return web.json_response({}, status=status, headers=headers)


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[..., Any]]:
    runners: list[web.AppRunner] = []

    async def start(respond: Callable[..., tuple[int, dict[str, str]]]) -> Scripted:
        server = Scripted(respond)
        app = web.Application(client_max_size=2**26)
        app.router.add_post("/events", server.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        server.url = f"http://127.0.0.1:{port}"
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_retry_after_in_seconds_and_as_http_date_is_honoured(
    scripted: Any, workspace: Path, state_dir: Path
) -> None:
    date: list[float] = []

    def respond(number: int, _items: list[Any]) -> tuple[int, dict[str, str]]:
        if number == 1:
            return 429, {"Retry-After": "1"}
        if number == 2:
            moment = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
            date.append(moment.timestamp())
            return 503, {"Retry-After": format_datetime(moment, usegmt=True)}
        return 200, {}

    server = await scripted(respond)
    ws = await open_workspace(workspace, state_dir, server.url, forwardRetryInitialMs=1)
    try:
        await ws.intake.submit_many(submissions(10))
        await drained(ws)
    finally:
        await ws.close()
    (first, _), (second, _), (third, _) = server.arrivals[:3]
    # Backoff alone would retry within milliseconds; the server's wishes set the pace.
    assert second - first >= 1.0 - 0.05
    assert third >= date[0] - 0.05
    assert len(server.stored) >= 10


async def test_a_poison_envelope_is_dead_lettered_and_the_other_999_arrive(
    scripted: Any, workspace: Path, state_dir: Path
) -> None:
    def respond(_number: int, items: list[dict[str, Any]]) -> tuple[int, dict[str, str]]:
        poisoned = any(
            item["envelope"].get("payload", {}).get("file_path") == "src/poison.py"
            for item in items
        )
        return (400, {}) if poisoned else (200, {})

    server = await scripted(respond)
    ws = await open_workspace(workspace, state_dir, server.url)
    try:
        results = await ws.intake.submit_many(submissions(1000, poison=500))
        await drained(ws)
        status = (await ws.status()).forward
    finally:
        await ws.close()
    file_updates = [i for i in server.stored if "file_path" in i["envelope"].get("payload", {})]
    assert len(file_updates) == 999
    poison = results[500].event
    assert poison is not None
    poison_id = poison.event_id
    assert poison_id not in {i["envelope"]["event_id"] for i in server.stored}
    assert status is not None and status["dead_lettered"] == 1
    assert status["last_error"].startswith("HTTP 400")
    seqs = [item["seq"] for item in server.stored]
    assert seqs == sorted(seqs)  # splitting keeps the stream in order


async def test_413_splits_the_batch_until_it_fits(
    scripted: Any, workspace: Path, state_dir: Path
) -> None:
    server = await scripted(lambda _n, items: (413, {}) if len(items) > 100 else (200, {}))
    ws = await open_workspace(workspace, state_dir, server.url, forwardBatchSize=1000)
    try:
        await ws.intake.submit_many(submissions(1000))
        await drained(ws)
        status = (await ws.status()).forward
    finally:
        await ws.close()
    assert status is not None and status["dead_lettered"] == 0
    assert len({i["envelope"]["event_id"] for i in server.stored}) == status["delivered"] >= 1000
    assert [i["seq"] for i in server.stored] == sorted(i["seq"] for i in server.stored)


# -- the real collector ----------------------------------------------------------------------


async def test_a_drained_outbox_gives_its_pages_back_to_the_file_system(
    scripted: Any, tmp_path: Path
) -> None:
    server = await scripted(lambda _number, _items: (200, {}))
    database = tmp_path / "events.db"
    conn = connect(database)
    outbox.enable(conn, collector_sink(conn), budget_bytes=2**30)
    EventLog(conn).append([new_event(n) for n in range(1, 5001)])
    conn.close()
    writer = StoreWriter(database)
    await writer.start()
    forwarder = Forwarder(
        writer,
        HttpTransport(server.url + "/events", TOKEN),
        CollectorSink(),
        budget_bytes=2**30,
        reclaim_min_pages=1,  # the default waits for 1 MiB of free pages
    )
    await forwarder.start()

    def free_pages(conn: sqlite3.Connection) -> tuple[int, int]:
        pending = outbox.read_state(conn, collector_sink(conn)).pending
        return pending, conn.execute("PRAGMA freelist_count").fetchone()[0]

    try:
        deadline = time.monotonic() + 30
        while (state := await writer.read(free_pages)) != (0, 0):
            assert time.monotonic() < deadline, f"pending and free pages: {state}"
            await asyncio.sleep(0.02)
    finally:
        await forwarder.close()
        await writer.close()
    assert len(server.stored) == 5000


async def test_long_outage_then_back_loses_nothing_and_keeps_each_stream_in_order(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    workspaces = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        workspaces.append(await open_workspace(tmp_path / name, tmp_path / f"state-{name}", url))
    accepted: set[str] = set()
    try:
        for round_ in range(3):
            for ws in workspaces:
                batch = submissions(500, first=round_ * 500)
                accepted |= set(accepted_ids(await ws.intake.submit_many(batch)))
            await asyncio.sleep(0.3)  # refused connections meanwhile, retried with backoff
        statuses = [(await ws.status()).forward for ws in workspaces]
        assert all(s is not None and s["failed_attempts"] >= 3 for s in statuses)
        assert all(s is not None and s["last_error"] for s in statuses)
        assert all(s is not None and s["delivered"] == 0 for s in statuses)
        remote = Collector(tmp_path / "collector.db", port)
        try:
            for ws in workspaces:
                await drained(ws)
            events = remote.events()
        finally:
            remote.stop()
    finally:
        for ws in workspaces:
            await ws.close()
    delivered = [e["event_id"] for e in events]
    assert accepted <= set(delivered)
    assert len(delivered) == len(set(delivered))
    by_stream: dict[str, list[int]] = {}
    for event in events:
        by_stream.setdefault(event["stream"], []).append(event["seq"])
    assert len(by_stream) == 2
    for seqs in by_stream.values():
        assert seqs == sorted(seqs)


async def test_shutdown_with_the_remote_down_is_quick_and_delivery_resumes(
    tmp_path: Path, workspace: Path, state_dir: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ws = await open_workspace(workspace, state_dir, url)
    accepted = set(accepted_ids(await ws.intake.submit_many(submissions(5000))))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    await ws.close()
    # Not a speed figure: an unreachable remote must not hold the close up (a connect
    # timeout or a retry wait takes seconds); a loaded machine may take a second anyway.
    assert time.monotonic() - started < 4.0
    remote = Collector(tmp_path / "collector.db", port)
    try:
        ws = await open_workspace(workspace, state_dir, url)
        try:
            await drained(ws)
        finally:
            await ws.close()
        stored = {e["event_id"] for e in remote.events()}
    finally:
        remote.stop()
    assert accepted <= stored


def run_producer(
    mode: str, state: Path, root: Path, url: str, count: int = 0
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(PRODUCER), mode, str(state), str(root), url, str(count)],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )


def acknowledged(output: str) -> list[str]:
    """Ids from complete ``ACK`` lines (a kill can cut the last line short)."""
    complete = output.split("\n")[:-1]
    return [i for line in complete if line.startswith("ACK ") for i in line.split()[1:]]


def test_kill_9_at_random_instants_loses_no_acknowledged_event(
    tmp_path: Path, collector: Collector
) -> None:
    """20 runs of 10,000 events, SIGKILL at a random instant, restart, drain, compare."""
    chooser = random.Random(int(os.environ.get("MPLP_KILL_SEED", "5")))
    all_acked: list[str] = []
    for run in range(20):
        root = tmp_path / f"ws{run}"
        root.mkdir()
        state = tmp_path / f"state{run}"
        producer = run_producer("produce", state, root, collector.url, 10_000)
        assert producer.stdout is not None
        assert producer.stdout.readline().strip() == "READY"
        time.sleep(chooser.uniform(0.0, 0.8))
        producer.send_signal(signal.SIGKILL)
        output, _ = producer.communicate(timeout=30)
        acked = acknowledged(output)
        drainer = run_producer("drain", state, root, collector.url)
        output, _ = drainer.communicate(timeout=60)
        assert drainer.returncode == 0 and "DRAINED" in output
        all_acked += acked
    stored = [e["event_id"] for e in collector.events()]
    assert len(stored) == len(set(stored))
    assert set(all_acked) <= set(stored)
    assert len(all_acked) > 0


def test_kill_9_between_the_2xx_and_the_ack_duplicates_at_most_one_batch(
    tmp_path: Path, collector: Collector, workspace: Path, state_dir: Path
) -> None:
    producer = run_producer("crash-after-2xx", state_dir, workspace, collector.url, 3000)
    output, _ = producer.communicate(timeout=60)
    assert producer.returncode == -signal.SIGKILL
    crashed_batch = int(
        next(line for line in output.splitlines() if line.startswith("CRASH")).split()[1]
    )
    acked = acknowledged(output)
    drainer = run_producer("drain", state_dir, workspace, collector.url)
    output, _ = drainer.communicate(timeout=60)
    assert "DRAINED" in output
    stats = collector.get("/stats")
    stored = [e["event_id"] for e in collector.events()]
    assert len(stored) == len(set(stored)) == stats["stored"]
    assert set(acked) <= set(stored)
    # The re-sent batch was recognised: on the wire at most one batch twice, stored once.
    assert (
        stats.get("duplicates", 0) + stats.get("replayed_batches", 0) * crashed_batch
        <= crashed_batch * 2
    )
    assert stats.get("duplicates", 0) <= crashed_batch


# -- damaged store files ---------------------------------------------------------------------


async def make_store(root: Path, state: Path, count: int = 3000) -> set[str]:
    """Every event id in the store (the file events and the PSG's graph events)."""
    ws = await open_workspace(root, state, None)
    try:
        await ws.intake.submit_many(submissions(count))
        await ws.settle()
    finally:
        await ws.close()
    conn = sqlite3.connect(state / "events.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ids = {row[0] for row in conn.execute("SELECT event_id FROM events")}
    conn.close()
    return ids


def garble_page(path: Path) -> None:
    """Overwrite the middle leaf page of the event log's table with noise: damage a read of
    the events meets, wherever the schema puts its other tables and indexes."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        leaves = [
            number
            for (number,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf'"
                " ORDER BY pageno"
            )
        ]
    with path.open("r+b") as handle:
        handle.seek((leaves[len(leaves) // 2] - 1) * page_size)
        handle.write(random.Random(1).randbytes(page_size))


def flip_bytes(path: Path) -> None:
    chooser = random.Random(2)
    size = path.stat().st_size
    with path.open("r+b") as handle:
        for _ in range(200):
            handle.seek(chooser.randrange(100, size))
            handle.write(bytes([chooser.randrange(256)]))


def delete_keeping_wal(path: Path) -> None:
    path.with_name(path.name + "-wal").write_bytes(b"\0" * 4096)
    path.unlink()


def garble_header(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.write(b"this is not an sqlite file at all")


@pytest.mark.parametrize(
    "damage", [garble_page, flip_bytes, truncate, delete_keeping_wal, garble_header]
)
async def test_a_damaged_store_is_moved_aside_salvaged_and_the_daemon_goes_on(
    damage: Callable[[Path], None], tmp_path: Path, workspace: Path, state_dir: Path
) -> None:
    before = await make_store(workspace, state_dir)
    damage(state_dir / "events.db")
    started = time.monotonic()
    ws = await open_workspace(workspace, state_dir, None)
    try:
        # Not a speed figure: opening must not wait out SQLite's busy timeout on the damaged
        # file (BUSY_TIMEOUT_MS), which a loaded machine's slower open stays well under.
        assert time.monotonic() - started < BUSY_TIMEOUT_MS / 1000
        status = await ws.status()
        after = set(accepted_ids(await ws.intake.submit_many(submissions(10, first=10**6))))
        assert len(after) == 10  # it goes on accepting
        stored = {e.event_id for e in await ws._writer.read(lambda c: EventLog(c).query())}
    finally:
        await ws.close()
    if damage is flip_bytes and status.store_health == "ok":
        return  # the flips hit only record payloads: SQLite's structure is intact
    assert status.store_health == "degraded"
    assert status.salvage is not None and status.salvage["moved_to"]
    assert Path(status.salvage["moved_to"]).is_dir()
    copied = status.salvage["copied"].get("events", 0)
    assert stored >= after
    # A flipped byte may land in an id column: such a row is copied but no longer matches.
    assert copied - 200 <= len(stored & before) <= copied
    if damage is not flip_bytes:
        assert len(stored & before) == copied
    lost = status.salvage["lost"].get("events", 0)
    if damage in (garble_page, truncate):
        assert copied > 0  # what could be read was kept
    if damage is garble_page:
        assert copied + lost == len(before)
    assert status.forward is not None and status.forward["quarantined"] == lost


async def test_damage_found_while_running_is_salvaged_and_the_daemon_goes_on(
    workspace: Path, state_dir: Path
) -> None:
    before = await make_store(workspace, state_dir)
    ws = await open_workspace(workspace, state_dir, None)
    try:
        garble_page(state_dir / "events.db")
        # Forget the pages the writer has cached, as memory pressure would, so the next
        # read meets the damage.
        await ws._writer.read(lambda c: c.execute("PRAGMA shrink_memory"))
        stored = {e.event_id for e in await ws._writer.read(lambda c: EventLog(c).query())}
        status = await ws.status()
        after = set(accepted_ids(await ws.intake.submit_many(submissions(10, first=10**6))))
        found = {e.event_id for e in await ws._writer.read(lambda c: EventLog(c).query())}
    finally:
        await ws.close()
    assert status.store_health == "degraded"
    assert status.salvage is not None and Path(status.salvage["moved_to"]).is_dir()
    copied = status.salvage["copied"]["events"]
    lost = status.salvage["lost"].get("events", 0)
    assert lost > 0 and len(stored) == copied and stored <= before
    assert copied + lost >= len(before)
    assert len(after) == 10 and after | stored == found  # it goes on, on the salvaged store
    reopened = await open_workspace(workspace, state_dir, None)
    try:
        assert (await reopened.status()).store_health == "degraded"  # no second salvage
        assert (await reopened.status()).salvage == status.salvage
    finally:
        await reopened.close()


# -- dead letters: refused, listed, requeued beside the running daemon, delivered ------------


async def outbox_cli(state: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Off the event loop, so the daemon in this process keeps running meanwhile."""
    command = [sys.executable, "-m", "mplp_lsp", "outbox", *args]
    command += ["--state-dir", str(state), "--workspace", str(root)]
    return await asyncio.to_thread(
        subprocess.run, command, env=child_env(), capture_output=True, text=True, timeout=60
    )


async def dead_letters(state: Path, root: Path) -> list[dict[str, Any]]:
    done = await outbox_cli(state, root, "dead", "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


async def test_a_poison_envelope_is_requeued_to_a_running_daemon_and_arrives(
    scripted: Any, workspace: Path, state_dir: Path
) -> None:
    refusing = True

    def respond(_number: int, items: list[dict[str, Any]]) -> tuple[int, dict[str, str]]:
        poisoned = any(
            item["envelope"].get("payload", {}).get("file_path") == "src/poison.py"
            for item in items
        )
        return (400, {}) if poisoned and refusing else (200, {})

    server = await scripted(respond)
    ws = await open_workspace(workspace, state_dir, server.url)
    try:
        results = await ws.intake.submit_many(submissions(20, poison=7))
        poison = results[7].event
        assert poison is not None
        poison_id = poison.event_id

        async def refused() -> bool:
            return [d["event_id"] for d in await dead_letters(state_dir, workspace)] == [poison_id]

        await wait_until_async(refused)
        (letter,) = await dead_letters(state_dir, workspace)
        assert (letter["kind"], letter["status"]) == ("file_update", 400)
        assert letter["reason"].startswith("HTTP 400")
        refusing = False  # the remote's bug is fixed; the daemon keeps running
        done = await outbox_cli(state_dir, workspace, "requeue", str(letter["seq"]))
        assert (done.returncode, done.stdout) == (0, "requeued 1 dead letter\n"), done.stderr

        async def arrived() -> bool:
            return poison_id in {item["envelope"]["event_id"] for item in server.stored}

        await wait_until_async(arrived)
        await drained(ws)  # the remote stores the batch before its answer reaches the daemon
        status = (await ws.status()).forward
    finally:
        await ws.close()
    assert await dead_letters(state_dir, workspace) == []
    assert status is not None and status["dead_lettered"] == 1 and status["depth"] == 0
    assert status["dead_letters"] == 0  # refused once, requeued, delivered
    poison_item = next(i for i in server.stored if i["envelope"]["event_id"] == poison_id)
    assert poison_item["seq"] == letter["seq"]  # the same stream position as before


async def test_refused_by_the_collector_for_a_bad_token_then_requeued_with_the_right_one(
    tmp_path: Path, workspace: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = Collector(tmp_path / "collector.db")
    try:
        monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", "not-" + TOKEN)
        ws = await open_workspace(workspace, state_dir, remote.url)
        try:
            accepted = set(accepted_ids(await ws.intake.submit_many(submissions(5))))

            async def refused() -> bool:
                dead = {d["event_id"] for d in await dead_letters(state_dir, workspace)}
                return accepted <= dead

            await wait_until_async(refused)
        finally:
            await ws.close()
        letters = await dead_letters(state_dir, workspace)
        assert {d["status"] for d in letters} == {401}
        assert remote.get("/stats")["stored"] == 0

        monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)
        ws = await open_workspace(workspace, state_dir, remote.url)
        try:
            # A started daemon with nothing pending: requeueing must wake it, not a restart.
            await asyncio.sleep(0.2)
            unknown = str(max(d["seq"] for d in letters) + 1000)
            done = await outbox_cli(state_dir, workspace, "requeue", "--all")
            assert (done.returncode, done.stdout) == (0, f"requeued {len(letters)} dead letters\n")
            missing = await outbox_cli(state_dir, workspace, "requeue", unknown)
            assert missing.returncode == 1 and unknown in missing.stderr

            async def delivered() -> bool:
                return {e["event_id"] for e in remote.events()} == {d["event_id"] for d in letters}

            await wait_until_async(delivered)
        finally:
            await ws.close()
    finally:
        remote.stop()
    assert await dead_letters(state_dir, workspace) == []


async def status_report(state: Path, workspace: Path, *extra: str) -> Any:
    args = ("status", "--state-dir", str(state), "--workspace", str(workspace), *extra)
    done = await asyncio.to_thread(cli, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if extra else done.stdout


async def test_status_of_a_recording_daemon_shows_its_forwarders_live_state(
    tmp_path: Path, collector: Collector
) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    daemon = await start_watch(workspace, state, "--remote", collector.url)
    try:
        await wait_for_api(state, workspace)
        (workspace / "a.py").write_text("x = 1\n")

        async def delivered() -> bool:
            forward = (await status_report(state, workspace, "--json"))["forward"]
            return forward is not None and forward["delivered"] >= 1

        await wait_until_async(delivered)
        live = (await status_report(state, workspace, "--json"))["forward"]
        text = await status_report(state, workspace)
    finally:
        err = await stop(daemon)
    assert daemon.returncode == 0, err
    assert live["state"] in ("idle", "sending")
    assert live["remote"] == collector.url
    assert f"forwarding    {live['state']} (remote {collector.url})" in text
    # The store alone, once nobody records: forwarding stays on for it, nobody sends now.
    stored = (await status_report(state, workspace, "--json"))["forward"]
    assert (stored["state"], stored["remote"]) == ("queuing", None)
    assert stored["delivered"] == live["delivered"]


async def test_status_says_unknown_when_the_recording_daemon_cannot_be_asked(
    tmp_path: Path, collector: Collector
) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    daemon = await start_watch(workspace, state, "--remote", collector.url, "--no-api")
    try:

        async def recording() -> bool:
            report = await status_report(state, workspace, "--json")
            return report["daemon"] is not None and report["forward"] is not None

        await wait_until_async(recording)
        report = await status_report(state, workspace, "--json")
    finally:
        err = await stop(daemon)
    assert daemon.returncode == 0, err
    assert report["api"] is None
    assert report["forward"]["state"] == "unknown"

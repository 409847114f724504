"""Retention and compaction on real stores: what is still to be sent to a real collector on
127.0.0.1 stays and arrives; the recorded content a drift finding needs stays and restores
the file; a compacted store that is damaged salvages and forwards as one never compacted.

A pass runs "a year and more later" by its ``now`` (the time retention's age counts from),
so the stores need no ageing by hand; everything else is real: files, SQLite, HTTP, the
collector process, `mplp-lsp status` as a process.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.drift import Strategy
from mplp_lsp.engine.compaction import Pass
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.sources.debounce import Change
from tests.support.collector import TOKEN, Collector, free_port
from tests.support.forwarding import accepted_ids, drained, open_workspace, submissions, truncate

LATER = datetime.now(UTC) + timedelta(days=400)


@pytest.fixture(autouse=True)
def remote_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)


def stored_ids(state: Path) -> set[str]:
    conn = sqlite3.connect(state / "events.db")
    try:
        return {row[0] for row in conn.execute("SELECT event_id FROM events")}
    finally:
        conn.close()


def received_ids(collector: Collector) -> set[str]:
    return {event["envelope"]["event_id"] for event in collector.events()}


async def opened(root: Path, state: Path, url: str | None, **settings: Any) -> Workspace:
    """A workspace whose passes the test runs itself (its own first pass would race them)."""
    ws = await open_workspace(root, state, url, **settings)
    await ws.owner.compaction.close()
    return ws


async def record(ws: Workspace, files: dict[str, str]) -> None:
    for path, text in files.items():
        (ws.root / path).write_text(text)
        ws.observe(Change.CREATED, path)
    await ws.settle()
    await ws.bus.drain()


async def forwarding_to(
    tmp_path: Path, workspace: Path, state_dir: Path, port: int
) -> tuple[Collector, Workspace]:
    """A collector on ``port`` and a workspace forwarding to it that keeps 30 days."""
    collector = Collector(tmp_path / "collector.db", port)
    return collector, await opened(workspace, state_dir, collector.url, retentionDays=30)


async def sent_then_waiting(
    ws: Workspace, collector: Collector, sent: int, waiting: int
) -> tuple[list[str], list[str], Pass]:
    """``sent`` events delivered; the collector stopped; ``waiting`` more queued for it; then
    a compaction pass a year and more later. The ids of both, and what the pass did."""
    delivered = accepted_ids(await ws.intake.submit_many(submissions(sent)))
    await ws.settle()
    await drained(ws)
    collector.stop()  # the remote goes away: what comes now waits in the outbox
    queued = accepted_ids(await ws.intake.submit_many(submissions(waiting, first=sent)))
    await ws.settle()
    return delivered, queued, await ws.owner.compaction.run_once(now=LATER)


async def test_nothing_still_to_be_sent_is_removed_and_all_of_it_arrives(
    tmp_path: Path, workspace: Path, state_dir: Path
) -> None:
    port = free_port()
    collector, ws = await forwarding_to(tmp_path, workspace, state_dir, port)
    try:
        delivered, waiting, done = await sent_then_waiting(ws, collector, 300, 200)
        kept = stored_ids(state_dir)
        assert done.events_removed >= len(delivered) and done.reason == "age"
        assert set(waiting) <= kept  # nothing unsent is removed
        assert not set(delivered) & kept  # what the remote has is
        collector = Collector(tmp_path / "collector.db", port)  # back, on the same address
        await drained(ws)
        assert set(delivered) | set(waiting) <= received_ids(collector)
    finally:
        await ws.close()
        collector.stop()


async def test_a_snapshot_a_drift_finding_needs_survives_and_restores_the_file(
    workspace: Path, state_dir: Path
) -> None:
    ws = await opened(workspace, state_dir, None, retentionDays=30, driftInterval=0)
    try:
        await record(ws, {"kept.py": "answer = 42\n", "other.py": "x = 1\n"})
        (workspace / "kept.py").write_text("answer = 'changed behind our back'\n")
        await ws.drift.scan()
        assert set(ws.drift.open_drifts) == {"kept.py"}
        done = await ws.owner.compaction.run_once(now=LATER)
        assert done.snapshots_removed == 1  # other.py's: no finding needs it
        restored = await ws.drift.resolve("kept.py", Strategy.PSG)
        assert restored.ok, restored.message
        assert (workspace / "kept.py").read_text() == "answer = 42\n"
        (workspace / "other.py").write_text("x = 2\n")
        await ws.drift.scan()
        gone = await ws.drift.resolve("other.py", Strategy.PSG)
        assert not gone.ok and "no recorded content" in gone.message
    finally:
        await ws.close()


async def test_snapshots_are_compressed_once_and_read_back_as_recorded(
    workspace: Path, state_dir: Path
) -> None:
    text = "".join(f"def handler_{n}(event):\n    return event['{n}']\n\n" for n in range(300))
    ws = await opened(workspace, state_dir, None, driftInterval=0)
    try:
        await record(ws, {"a.py": text, "b.py": text})  # one content: one snapshot
        done = await ws.owner.compaction.run_once()
        assert done.snapshots_compressed == 1 and done.events_removed == 0
        (workspace / "a.py").write_text("lost\n")
        await ws.drift.scan()
        assert (await ws.drift.resolve("a.py", Strategy.PSG)).ok
        assert (workspace / "a.py").read_text() == text
    finally:
        await ws.close()
    conn = sqlite3.connect(state_dir / "events.db")
    [(stored, codec)] = conn.execute("SELECT length(content), codec FROM psg_snapshots")
    conn.close()
    assert codec == "zlib" and stored * 4 < len(text)


async def test_a_compacted_store_salvages_and_forwards_as_before(
    tmp_path: Path, workspace: Path, state_dir: Path
) -> None:
    port = free_port()
    collector, ws = await forwarding_to(tmp_path, workspace, state_dir, port)
    try:
        _, waiting, done = await sent_then_waiting(ws, collector, 1500, 1500)
        assert done.events_removed >= 1500
    finally:
        await ws.close()
    conn = sqlite3.connect(state_dir / "events.db")
    highest = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    truncate(state_dir / "events.db")
    collector, ws = await forwarding_to(tmp_path, workspace, state_dir, port)
    try:
        await drained(ws)
        status = await ws.status()
        kept = stored_ids(state_dir)
    finally:
        await ws.close()
        received = received_ids(collector)
        collector.stop()
    assert status.store_health == "degraded" and status.salvage is not None
    copied = status.salvage["copied"]["events"]
    assert status.salvage["highest_seq"] == highest
    # Lost: what was there after compaction and could not be read; never what it removed.
    assert status.salvage["lost"]["events"] == highest - done.events_removed - copied > 0
    assert status.forward is not None
    assert status.forward["quarantined"] == highest - done.events_removed - copied
    assert set(waiting) & kept <= received  # every salvaged waiting event arrived


def test_status_says_what_retention_holds_to_and_would_remove(
    workspace: Path, state_dir: Path
) -> None:
    async def fill() -> None:
        ws = await opened(workspace, state_dir, None)
        try:
            await ws.intake.submit_many(submissions(3000))
            await ws.settle()
        finally:
            await ws.close()

    asyncio.run(fill())
    report = _status(workspace, state_dir, "--set", "retentionDays=0", "--set", "storeMaxMb=1")
    retention = report["retention"]
    assert (retention["max_age_days"], retention["max_bytes"]) == (0, 2**20)
    assert retention["store_bytes"] > 2**20
    assert retention["reason"] == "size" and 0 < retention["removable_events"] < 6000
    text = _status_text(workspace, state_dir, "--set", "storeMaxMb=1")
    assert "retention     events for 365 days, the store up to 1 MiB" in text
    assert "over the size limit" in text
    kept = _status(workspace, state_dir)["retention"]  # the defaults: nothing to remove
    assert (kept["removable_events"], kept["reason"]) == (0, None)


def _status(workspace: Path, state: Path, *extra: str) -> Any:
    return json.loads(_status_text(workspace, state, "--json", *extra))


def _status_text(workspace: Path, state: Path, *extra: str) -> str:
    argv = [sys.executable, "-m", "mplp_lsp", "status", "--workspace", str(workspace)]
    done = subprocess.run(
        [*argv, "--state-dir", str(state), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_a_recording_daemon_runs_its_first_pass_once_quiet(tmp_path: Path) -> None:
    from tests.gitrepo import Repo
    from tests.support.waiting import wait_until
    from tests.ui.daemon import Watch, base_env

    repo = Repo.create(tmp_path / "project")
    (repo.path / "src").mkdir()
    repo.commit("the first module", "src/app.py")
    watch = Watch.start(repo.path, tmp_path / "state", base_env(tmp_path))
    try:
        (repo.path / "src" / "app.py").write_text("print('recorded, then compressed')\n" * 50)

        def last_pass() -> Any:
            report = _status(repo.path, watch.state_dir)
            return report["retention"]["last_pass"]

        done = wait_until(last_pass, timeout=60, what="the daemon's first compaction pass")
        assert done["bytes_after"] > 0 and done["reason"] is None
        retention = _status(repo.path, watch.state_dir)["retention"]
        assert retention["snapshots_to_compress"] == 0
    finally:
        watch.stop()

"""The command line writes a store only through its owner, and every rejection is recorded the
same way: a real ``mplp-lsp watch`` daemon holds the state dir while the CLI and HTTP act."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from mplp_lsp.cli import main
from mplp_lsp.store import EventLog, connect
from tests.support.daemon import cli, start_watch, stop, wait_for_api
from tests.support.stores import REFUSALS, assert_counters_match_tables, make_store, tables
from tests.support.waiting import wait_until_async

# The one shape of a rejection in the integration error log, whatever the path.
SHAPE = {"time", "source_module", "kind", "errors", "input_excerpt"}
BAD_GIT = ["--commit-id", "abc", "--event-kind", "teleport"]


def rejections(state: Path) -> list[dict[str, Any]]:
    log = state / "integration-errors.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def rejected_counter(state: Path) -> int:
    conn = connect(state / "events.db", read_only=True)
    try:
        return EventLog(conn).counters().get("rejected", 0)
    finally:
        conn.close()


async def until(check: Any, timeout: float = 30) -> None:
    """``check`` (it reads the store) polled off the event loop, where the daemon's answers
    are read."""
    await wait_until_async(lambda: asyncio.to_thread(check), timeout=timeout, what=check)


def test_a_rejection_with_no_daemon_is_logged_and_counted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    args = ["emit", "git", "--workspace", str(tmp_path), "--state-dir", str(state)]
    assert main([*args, *BAD_GIT]) == 1
    [record] = rejections(state)
    assert set(record) == SHAPE and record["source_module"] == "cli"
    assert rejected_counter(state) == 1


async def test_every_rejection_path_beside_a_daemon_has_one_shape_and_counts(
    tmp_path: Path,
) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    daemon = await start_watch(workspace, state)
    try:
        api = await wait_for_api(state, workspace)
        token = Path(api["token_file"]).read_text().strip()
        # The CLI (as hooks and emit run): refused at once, recorded by the daemon.
        done = await asyncio.to_thread(
            cli,
            "emit",
            "git",
            "--workspace",
            str(workspace),
            "--state-dir",
            str(state),
            *BAD_GIT,
        )
        assert done.returncode == 1 and json.loads(done.stdout)["ok"] is False
        await until(lambda: rejected_counter(state) == 1)
        # HTTP: an event that does not validate, and one that is not even JSON.
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        async with aiohttp.ClientSession(headers=headers) as session:
            for body in (json.dumps({"commit_id": "abc"}), "{not json"):
                async with session.post(api["url"] + "/integration/git", data=body) as response:
                    assert response.status == 422
        await until(lambda: rejected_counter(state) == 3)
    finally:
        err = await stop(daemon)
    assert daemon.returncode == 0, err
    records = rejections(state)
    assert [r["source_module"] for r in records] == ["cli", "http", "http"]
    assert all(set(r) == SHAPE for r in records)
    assert rejected_counter(state) == 3


async def test_requeue_beside_a_running_daemon_goes_through_it(tmp_path: Path) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    state.mkdir()
    make_store(state / "events.db", 6, REFUSALS)
    daemon = await start_watch(workspace, state)
    try:
        await wait_for_api(state, workspace)  # the daemon holds the state dir now
        done = await asyncio.to_thread(
            cli,
            "outbox",
            "requeue",
            "4",
            "3",
            "--state-dir",
            str(state),
            "--workspace",
            str(workspace),
        )
        assert (done.returncode, done.stdout) == (1, "requeued 1 dead letter\n")
        assert done.stderr == "mplp-lsp outbox requeue: not dead letters: 3\n"
        assert tables(state / "events.db")[:2] == ([1, 3, 4, 6], [2, 5])
        assert list((state / "inbox").glob("*.json")) == []
    finally:
        err = await stop(daemon)
    assert daemon.returncode == 0, err
    assert_counters_match_tables(state / "events.db")


def test_the_store_is_not_written_while_its_lock_is_held(tmp_path: Path) -> None:
    # What the command line does to a locked store's file: nothing (it reads, or hands over).
    from mplp_lsp.engine.handoff import requeue_dead_letters
    from mplp_lsp.engine.statedir import StateDirLock, StatePaths

    state = tmp_path / "state"
    state.mkdir()
    make_store(state / "events.db", 6, REFUSALS)
    paths = StatePaths(state)
    before = (state / "events.db").read_bytes()
    with StateDirLock(paths.lock, workspace=tmp_path):
        done = requeue_dead_letters(tmp_path, state, None, wait=0.2)
        assert done is not None and (done.moved, done.taken) == (3, False)
        assert (state / "events.db").read_bytes() == before
        assert len(list((state / "inbox").glob("*.json"))) == 1
    # The next owner takes the request from the inbox first: 2 is no dead letter by then.
    again = ["outbox", "requeue", "2", "--state-dir", str(state), "--workspace", str(tmp_path)]
    assert main(again) == 1
    assert tables(state / "events.db")[:2] == ([1, 2, 3, 4, 5, 6], [])

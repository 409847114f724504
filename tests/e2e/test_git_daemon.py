"""The hooks fire while a real ``mplp-lsp watch`` process owns the store: each operation is
stored exactly once (the hook's events go through the daemon's inbox, the daemon's poller
derives the same payloads and they are dropped as duplicates)."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

from mplp_lsp.sources.git_state import load_refs
from mplp_lsp.store.database import connect
from mplp_lsp.vcs.refs import read_snapshot
from tests.e2e.harness import server_env
from tests.gitrepo import Repo
from tests.support.git_history import (
    Triple,
    assert_valid,
    install_hooks,
    scenario,
    stored_git_events,
    triples,
    wait_for_count,
)


async def wait_until_recorded(repo: Repo, state: Path, timeout: float = 30.0) -> None:
    refs = read_snapshot(repo.path / ".git", repo.path / ".git").refs
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conn = connect(state / "events.db", read_only=True)
        try:
            if load_refs(conn) == refs:
                return
        finally:
            conn.close()
        await asyncio.sleep(0.05)
    raise TimeoutError("the daemon did not record the refs")


async def test_hooks_while_the_watch_daemon_runs(tmp_path: Path) -> None:
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    steps = scenario()  # origin is set from its first step (see its docstring)
    install_hooks(repo, state)
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mplp_lsp", "watch", str(repo.path), "--state-dir", str(state),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=server_env(),
    )  # fmt: skip
    try:
        assert daemon.stderr is not None
        await asyncio.wait_for(daemon.stderr.readline(), 30)  # "watching ...": it owns the store
        total: list[Triple] = []
        for name, step in steps:
            total += step(repo)
            events = await wait_for_count(state / "events.db", len(total))
            assert sorted(triples(events)) == sorted(total), name
            await wait_until_recorded(repo, state)  # the poller saw it too
        await asyncio.sleep(2.0)  # late hook processes and polls would add duplicates now
        events = stored_git_events(state / "events.db")
        assert sorted(triples(events)) == sorted(total)
        assert_valid(events)
    finally:
        daemon.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(daemon.communicate(), 30)
    assert daemon.returncode == 0, err.decode(errors="replace")

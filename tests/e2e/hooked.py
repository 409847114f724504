"""A repository with mplp-lsp's hooks installed by the real CLI, and what its store holds.

Waiting is done by outcome, never by a fixed time: :func:`after_sentinel` makes one more
commit and waits for its event; hook records are taken in the order Git made them, so once
that event is stored everything before it has been ingested too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.e2e.harness import server_env, watch_argv
from tests.gitrepo import BASE_ENV, Repo

CLI = str(Path(sys.executable).with_name("mplp-lsp"))


def mplp(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MPLP_LSP_STATE_DIR"}
    return subprocess.run(
        [CLI, *args], env=env, capture_output=True, text=True, check=check, timeout=120
    )


def hooked_repo(path: Path, state: Path) -> Repo:
    """A repository with one commit and the hooks installed, recording into ``state``."""
    repo = Repo.create(path)
    repo.commit("base")
    mplp("hooks", "install", "--workspace", str(repo.path), "--state-dir", str(state))
    return repo


def with_a_colleague(tmp_path: Path) -> tuple[Repo, Path, Repo]:
    """A hooked repository recording into a state dir, and someone else's clone of a bare
    ``origin`` both push to: commits made there are made where no hook of ours runs."""
    state, remote = tmp_path / "state", tmp_path / "remote.git"
    repo = hooked_repo(tmp_path / "ws", state)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    repo.git("remote", "add", "origin", str(remote))
    repo.git("push", "-q", "-u", "origin", "main")
    other = Repo(tmp_path / "other")
    subprocess.run(["git", "clone", "-q", str(remote), str(other.path)], check=True)
    return repo, state, other


def shell(repo: Repo, script: str) -> None:
    """A chain of git commands at full speed, as a user's script runs them."""
    env = {**os.environ, **BASE_ENV}
    subprocess.run(["sh", "-c", script], cwd=repo.path, env=env, check=True, capture_output=True)


def git_events(state: Path) -> list[dict[str, Any]]:
    """The stored git_event payloads, in the order they were stored."""
    return [envelope["payload"] for envelope in envelopes(state, "git")]


def envelopes(state: Path, kind: str) -> list[dict[str, Any]]:
    database = state / "events.db"
    if not database.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT body FROM events WHERE kind = ? ORDER BY seq", (kind,)
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError:  # created or migrated right now
        return []
    return [json.loads(body) for (body,) in rows]


async def wait_for(state: Path, commit_id: str, timeout: float = 120.0) -> list[dict[str, Any]]:
    """The stored git events, once one names ``commit_id``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = git_events(state)
        if any(event["commit_id"] == commit_id for event in events):
            return events
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no event for {commit_id} after {timeout} s")


async def after_sentinel(repo: Repo, state: Path) -> list[dict[str, Any]]:
    """The events stored before a new commit's own event (which is waited for)."""
    sentinel = repo.commit("sentinel", "sentinel.txt")
    events = await wait_for(state, sentinel)
    index = next(i for i, event in enumerate(events) if event["commit_id"] == sentinel)
    return events[:index]


@contextlib.asynccontextmanager
async def watching(repo: Repo, state: Path, *extra: str) -> AsyncIterator[list[bytes]]:
    """A real ``mplp-lsp watch`` daemon owning the store; yields what it writes to stderr
    (read all along, so that a daemon logging a lot never blocks on a full pipe)."""
    daemon = await asyncio.create_subprocess_exec(
        *watch_argv(repo.path, state, *extra),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=server_env(),
    )
    assert daemon.stderr is not None
    lines: list[bytes] = []
    started = asyncio.get_running_loop().create_future()

    async def drain(stream: asyncio.StreamReader) -> None:
        async for line in stream:
            lines.append(line)
            if not started.done():
                started.set_result(line)  # "watching ...": it owns the store

    reader = asyncio.create_task(drain(daemon.stderr))
    try:
        await asyncio.wait_for(asyncio.shield(started), 60)
        yield lines
    finally:
        daemon.terminate()
        try:
            await asyncio.wait_for(daemon.wait(), 60)
        except TimeoutError:
            daemon.kill()
            await asyncio.wait_for(daemon.wait(), 60)
        # A process the daemon started may still hold its stderr: no waiting for it.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reader, 10)

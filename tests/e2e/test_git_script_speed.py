"""Git chained with ``&&`` at full speed, with the hooks installed: every operation is
stored exactly once, with no daemon (the hook processes store directly, side by side) and
with a ``watch`` daemon running (the hooks spool to its inbox while its poller reads the refs).

Each hook process works from what git showed it while the command ran, never from the
repository as it is when the process gets to run, by which time the next commands of the
chain have moved or deleted the refs it would look at.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.e2e.harness import server_env
from tests.gitrepo import BASE_ENV, Repo
from tests.support.git_history import install_hooks, stored_git_events

RUNS = 20
SETTLE = 1.5  # seconds of quiet after the last expected event: late duplicates show up by then
CHAIN_NO_DAEMON = (
    "echo a >> f && git commit -qam a && git checkout -qb feature && echo b >> f && "
    "git commit -qam b && git checkout -q main && git branch -qD feature"
)
CHAIN_DAEMON = (
    "git checkout -qb t5 && echo c >> f && git commit -qam c && git checkout -q main && "
    "git merge -q --ff-only t5 && git branch -qd t5"
)
Op = tuple[str, str, str]  # (event_kind, ref_name, commit_id); ref_name "" for commits


def run_chain(repo: Repo, chain: str) -> None:
    env = {**os.environ, **BASE_ENV}
    subprocess.run(["sh", "-c", chain], cwd=repo.path, env=env, check=True)


def reflog_commits(repo: Repo, ref: str, count: int) -> list[str]:
    """The commits HEAD's reflog names, newest first (the branches may be gone)."""
    out = repo.git("log", "-g", "--format=%H", f"-{count}", ref)
    return out.split()


def operations(events: list[dict[str, object]]) -> Counter[Op]:
    # A commit is one operation whichever branch it was first seen on (a daemon's poller
    # that looks after the branch is gone sees it on the branch it was merged into).
    return Counter(
        (str(e["event_kind"]), "" if e["event_kind"] == "commit" else str(e["ref_name"]),
         str(e["commit_id"]))
        for e in events
    )  # fmt: skip


async def settled(db: Path, want: Counter[Op], timeout: float = 240.0) -> Counter[Op]:
    """What the store holds once it has (at least) ``want`` and then stays quiet."""
    deadline = time.monotonic() + timeout
    seen: Counter[Op] = Counter()
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        try:
            now = operations(stored_git_events(db))
        except (FileNotFoundError, sqlite3.OperationalError):  # not there (or migrated) yet
            await asyncio.sleep(0.05)
            continue
        if now != seen:
            seen, quiet_since = now, time.monotonic()
        elif not (want - seen) and time.monotonic() - quiet_since > SETTLE:
            return seen
        await asyncio.sleep(0.05)
    return seen


def new_repo(path: Path, state: Path) -> Repo:
    repo = Repo.create(path)
    repo.commit("init", "f")
    install_hooks(repo, state)
    return repo


def expect_no_daemon(repo: Repo) -> Counter[Op]:
    b, a = reflog_commits(repo, "HEAD", 4)[1:3]  # checkout main, commit b, checkout -b, a
    return Counter(
        {
            ("commit", "", a): 1,
            ("branch_create", "refs/heads/feature", a): 1,
            ("commit", "", b): 1,
            ("branch_delete", "refs/heads/feature", b): 1,
        }
    )


def expect_daemon(base: str, c: str) -> Counter[Op]:
    return Counter(
        {
            ("branch_create", "refs/heads/t5", base): 1,
            ("commit", "", c): 1,
            ("merge", "refs/heads/main", c): 1,
            ("branch_delete", "refs/heads/t5", c): 1,
        }
    )


def report(got: Counter[Op], want: Counter[Op]) -> str:
    return f"missing {dict(want - got)}, extra {dict(got - want)}"


async def test_branch_delete_at_script_speed_without_a_daemon(tmp_path: Path) -> None:
    # 20 runs back to back, the next one starting while the hook processes of the last
    # are still at work: they meet at the store's lock and inbox.
    state = tmp_path / "state"
    repo = new_repo(tmp_path / "ws", state)
    want: Counter[Op] = Counter()
    started = time.monotonic()
    for _ in range(RUNS):
        run_chain(repo, CHAIN_NO_DAEMON)
        want += expect_no_daemon(repo)
    got = await settled(state / "events.db", want)
    print(f"{RUNS} runs stored in {time.monotonic() - started - SETTLE:.1f} s")
    assert got == want, report(got, want)


async def test_fast_forward_merge_at_script_speed_with_a_daemon(tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo = new_repo(tmp_path / "ws", state)
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mplp_lsp", "watch", str(repo.path), "--state-dir", str(state),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=server_env(),
    )  # fmt: skip
    try:
        assert daemon.stderr is not None
        await asyncio.wait_for(daemon.stderr.readline(), 30)  # "watching ...": it owns the store
        want: Counter[Op] = Counter()
        started = time.monotonic()
        for _ in range(RUNS):
            base = repo.rev("HEAD")
            run_chain(repo, CHAIN_DAEMON)
            want += expect_daemon(base, repo.rev("HEAD"))
        got = await settled(state / "events.db", want)
        print(f"{RUNS} runs stored in {time.monotonic() - started - SETTLE:.1f} s")
        assert got == want, report(got, want)
    finally:
        daemon.terminate()
        await daemon.wait()

"""Git source benchmarks, each beside a peer measured in the same run.

Run from the repository root: ``python bench/bench_git.py [--quick] [--commits N]``.

* catch-up: the daemon starts after N commits were made (history built with ``git
  fast-import``); time until all N git_events are stored (no peer: reported per commit);
* metadata with diff stats for N commits, against one ``git log -n N --numstat`` of the same
  commits (target ≤ 1.5×);
* an idle poll with nothing changed, against one ``os.stat`` (target ≤ 0.1 ms);
* latency from ``git commit`` returning to the event stored: poller only (default interval)
  and with the hook installed and no daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib.harness import Bench, percentile
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.store.database import connect
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs import hooks
from mplp_lsp.vcs.operations import commit_infos
from mplp_lsp.vcs.repo import GitRepo
from mplp_lsp.vcs.spool import MARKER


def fast_import(repo: Path, count: int, parent: str) -> None:
    lines = []
    for i in range(count):
        data = f"line {i}\n" * (1 + i % 7)
        lines += [
            "commit refs/heads/main",
            f"committer Ada Example <ada@example.org> {1_767_300_000 + i} +0000",
            f"data {len(f'commit {i}')}",
            f"commit {i}",
        ]
        if i == 0:
            lines.append(f"from {parent}")
        lines += [f"M 644 inline file{i % 50}.txt", f"data {len(data)}", data.rstrip("\n"), ""]
    stream = "\n".join(lines) + "\n"
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=stream, text=True, check=True)


def git_count(db: Path) -> int:
    conn = connect(db, read_only=True)
    try:
        return EventLog(conn).counts_by_kind().get("git", 0)
    finally:
        conn.close()


async def ingester_ended(marker: Path, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            os.kill(int(marker.read_text().strip()), 0)
        except (OSError, ValueError):
            return  # no marker, no pid, or the process is gone
        await asyncio.sleep(0.05)


async def main(bench: Bench, args: argparse.Namespace) -> None:
    commits, loops, samples = args.commits, args.polls, args.samples
    from tests.gitrepo import BASE_ENV, Repo

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = Repo.create(base / "ws")
        first = repo.commit("base")
        state = base / "state"
        settings = Settings(git_poll_ms=1000)
        workspace = await Workspace.open(repo.path, settings, state_dir=state)
        await workspace.close()  # the baseline is recorded
        fast_import(repo.path, commits, first)
        repo.git("reset", "-q", "--hard", "main")

        start = time.perf_counter()
        workspace = await Workspace.open(repo.path, settings, state_dir=state)
        await workspace.bus.drain()
        caught_up = time.perf_counter() - start
        stored = git_count(state / "events.db")
        assert stored == commits, (stored, commits)
        bench.figure(
            f"catch-up of {commits:,} commits at start (open + events stored)",
            caught_up * 1000,
            "ms",
        )
        bench.figure("  per commit (no target, no peer)", caught_up / commits * 1e6, "µs")

        opened = GitRepo.open(repo.path)
        ids = repo.git("rev-list", "-n", str(commits), "main").split()
        env = {**os.environ, **BASE_ENV}
        peer_times, our_times = [], []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run(  # noqa: ASYNC221 - the peer, timed on purpose
                [
                    "git",
                    "log",
                    "-n",
                    str(commits),
                    "--numstat",
                    "--format=%H%x00%an%x00%ae%x00%P%x00%B%x00",
                ],
                cwd=repo.path,
                env=env,
                capture_output=True,
                check=True,
            )
            peer_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            infos = commit_infos(opened, ids)
            our_times.append(time.perf_counter() - t)
        assert len(infos) == commits
        bench.figure(
            f"metadata with diff stats for {commits:,} commits",
            min(our_times) * 1000,
            "ms",
            target="<= 1.5x the peer",
            met=min(our_times) <= 1.5 * min(peer_times),
            peer=(f"git log -n {commits} --numstat", min(peer_times) * 1000),
        )
        opened.close()

        source = workspace.git
        await source.poll()
        t = time.perf_counter()
        for _ in range(loops):
            await source.poll()
        idle = (time.perf_counter() - t) / loops
        head_log = repo.path / ".git" / "logs" / "HEAD"
        t = time.perf_counter()
        for _ in range(loops):
            os.stat(head_log)
        one_stat = (time.perf_counter() - t) / loops
        bench.figure(
            "idle poll, nothing changed",
            idle * 1e3,
            "ms",
            target="<= 0.1 ms",
            met=idle <= 0.1e-3,
            peer=("one os.stat", one_stat * 1e3),
        )

        latencies = []
        for i in range(samples):
            before = git_count(state / "events.db")
            repo.commit(f"latency {i}")
            t = time.perf_counter()
            while git_count(state / "events.db") == before:
                await asyncio.sleep(0.005)
            latencies.append(time.perf_counter() - t)
        await workspace.close()
        bench.figure(
            f"commit -> stored, poller only (gitPollMs 1000), median of {samples}",
            percentile(latencies, 0.5) * 1000,
            "ms",
            target="<= the poll interval (1,000 ms)",
            met=percentile(latencies, 0.5) <= 1.0,
        )

        opened = GitRepo.open(repo.path)
        hooks.install(opened, repo.path, StatePaths(state))
        opened.close()
        latencies = []
        for i in range(samples):
            before = git_count(state / "events.db")
            t0 = time.perf_counter()
            repo.commit(f"hooked {i}")
            commit_took = time.perf_counter() - t0
            t = time.perf_counter()
            while git_count(state / "events.db") == before:
                await asyncio.sleep(0.005)
            latencies.append(time.perf_counter() - t)
        # The hook's background ingester may still be closing the store: the temporary
        # folder goes only once it has ended.
        await ingester_ended(StatePaths(state).git_spool / MARKER)
        bench.figure(
            f"commit -> stored, hook, no daemon, median of {samples}",
            percentile(latencies, 0.5) * 1000,
            "ms",
            peer=("git commit itself, with the hook", commit_took * 1000),
        )


if __name__ == "__main__":
    bench = Bench(__doc__)
    bench.size("--commits", full=10_000, quick=20, help="commits made before the daemon starts")
    bench.size("--polls", full=20_000, quick=200, help="idle polls (and os.stat calls) timed")
    bench.size("--samples", full=3, quick=1, help="commits timed to stored, each way")
    with bench.run() as args:
        asyncio.run(main(bench, args))

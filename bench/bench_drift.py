"""Drift scans beside `git status --porcelain` on the same generated tree, in the same run.

Run from the repository root: python bench/bench_drift.py [--quick] [--files N] [--runs R]
[--tree DIR]

Generates (or reuses, with --tree) a committed tree of N files (default 100,000; see
bench/benchlib/drift_tree.py), records every file in a fresh store's PSG, opens the workspace as the
daemon does, and times, warm, as the median of R runs with `git status --porcelain` measured
between them:

* steady: the daemon's periodic full scan, nothing changed (recorded facts held in memory,
  ignore verdicts known). Target <= 2.5x git status.
* cold: the same scan after the ignore rules changed, so it re-reads every recorded fact
  from the store in one query and re-judges every path against fresh ignore rules (the
  start-up and CLI case).
* 1 % changed: 1 % of the files rewritten in place (same size, new content): the scan hashes
  only those. Target <= 2.5x git status with the same changes.
* re-check of 100 known changes (the passive path, O(N)): target <= 50 ms.
* change -> finding: an out-of-band change to the finding reaching the listeners the LSP
  shell turns into a diagnostic, for an on-demand scan (a periodic one adds up to the
  driftInterval before it starts).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from benchlib.drift_tree import make_tree
from benchlib.harness import Bench
from mplp_lsp.config.settings import parse_settings
from mplp_lsp.drift import Strategy
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.graph.content_hash import safe_hash
from mplp_lsp.store.database import connect


def git_status(root: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["git", "-C", str(root), "status", "--porcelain"], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - started


def record_all(root: Path, paths: list[str], database: Path) -> None:
    """The PSG as if every file had had an event: one node per file with its facts."""
    conn = connect(database)
    rows = []
    for path in paths:
        info = os.lstat(root / path)
        rows.append((path, "2026-01-01T00:00:00.000Z", info.st_size, info.st_mtime_ns,
                     safe_hash(str(root / path)), info.st_ino))  # fmt: skip
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO psg_files(path, last_modified, size, mtime_ns, content_hash, inode, "
        "updated_seq) VALUES (?, ?, ?, ?, ?, ?, 0)",
        rows,
    )
    conn.execute("COMMIT")
    conn.close()


async def paired(
    runs: int, mine: Callable[[], Awaitable[float]], root: Path
) -> tuple[float, float]:
    """Medians (seconds) of ours and git status, alternated so both see the same machine."""
    ours, peer = [], []
    await mine()  # warm-up
    git_status(root)
    for _ in range(runs):
        ours.append(await mine())
        peer.append(git_status(root))
    return statistics.median(ours), statistics.median(peer)


def line(bench: Bench, name: str, ours: float, peer: float, target: float) -> None:
    bench.figure(
        name,
        ours * 1000,
        "ms",
        target=f"<= {target}x git status",
        met=ours <= target * peer,
        peer=("git status --porcelain", peer * 1000),
    )


async def main_async(bench: Bench, args: argparse.Namespace) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="mplp-drift-bench-"))
    root = (Path(args.tree) if args.tree else scratch / "tree").resolve()
    print(f"tree: {args.files:,} files; preparing (generate, commit, record)...", flush=True)
    paths = make_tree(root, args.files)
    state = scratch / "state"
    state.mkdir()
    record_all(root, paths, state / "events.db")
    settings, _ = parse_settings({"driftInterval": 0})
    workspace = await Workspace.open(root, settings, state_dir=state)
    try:
        await workspace.drift.scan()  # the start-up scan

        async def steady() -> float:
            started = time.perf_counter()
            summary = await workspace.drift.scan()
            assert summary.drifted == 0 and summary.checked == len(paths), summary
            return time.perf_counter() - started

        async def cold() -> float:
            workspace.ignore.epoch += 1
            return await steady()

        line(bench, "full scan, nothing changed", *await paired(args.runs, steady, root), 2.5)
        line(bench, "cold scan (store read + ignore)", *await paired(args.runs, cold, root), 2.5)

        changed = paths[::100]
        originals = {p: (root / p).read_bytes() for p in changed}
        for path, data in originals.items():
            (root / path).write_bytes(data[::-1])  # same size, other content

        async def one_percent() -> float:
            started = time.perf_counter()
            summary = await workspace.drift.scan()
            assert summary.drifted == len(changed), summary
            return time.perf_counter() - started

        line(bench, "full scan, 1 % changed", *await paired(args.runs, one_percent, root), 2.5)

        known = changed[:100]
        samples = []
        for _ in range(args.runs):
            started = time.perf_counter()
            await workspace.drift.recheck(known)
            samples.append(time.perf_counter() - started)
        recheck = statistics.median(samples) * 1000
        bench.figure(f"re-check of {len(known)} known changes", recheck, "ms",
                     target="<= 50 ms (O(N), not O(tree))", met=recheck <= 50)  # fmt: skip
        for path, data in originals.items():
            (root / path).write_bytes(data)
        await workspace.drift.scan()

        latencies = []
        for attempt in range(args.runs):
            target = paths[attempt * 7 % len(paths)]
            found = asyncio.get_running_loop().create_future()

            def listener(changes: Mapping[str, object], target: str = target,
                         found: asyncio.Future[float] = found) -> None:  # fmt: skip
                if changes.get(target) is not None and not found.done():
                    found.set_result(time.perf_counter())

            workspace.drift.on_change(listener)
            data = (root / target).read_bytes()
            started = time.perf_counter()
            (root / target).write_bytes(data + b"#")
            await workspace.drift.scan()
            latencies.append(await found - started)
            (root / target).write_bytes(data)
            await workspace.drift.resolve(target, Strategy.FS)
        bench.figure("change -> finding (on-demand scan; + up to driftInterval when found by "
                     "the periodic scan)", statistics.median(latencies) * 1000, "ms")  # fmt: skip
    finally:
        await workspace.close()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--files", full=100_000, quick=200, help="files in the generated tree")
    bench.size("--runs", full=5, quick=1, help="timed runs of each scan (the median is shown)")
    bench.parser.add_argument("--tree", help="generate the tree here (or reuse one made before)")
    with bench.run() as args:
        asyncio.run(main_async(bench, args))


if __name__ == "__main__":
    main()

"""Drift scans beside `git status --porcelain` on the same generated tree, in the same run.

Run: python bench/bench_drift.py [--files N] [--runs R] [--tree DIR]

Generates (or reuses, with --tree) a committed tree of N files (default 100,000; see
bench/drift_tree.py), records every file in a fresh store's PSG, opens the workspace as the
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
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.drift_tree import make_tree
from mplp_lsp.runtime.drift import Strategy
from mplp_lsp.runtime.drift.scan import safe_hash
from mplp_lsp.settings import parse_settings
from mplp_lsp.store.database import connect
from mplp_lsp.workspace import Workspace


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


def line(name: str, ours: float, peer: float, target: float) -> None:
    ratio = ours / peer
    verdict = "ok" if ratio <= target else "OVER"
    print(f"{name:<34} {ours * 1000:8.1f} ms   git status {peer * 1000:7.1f} ms   "
          f"{ratio:5.2f}x (target <= {target}x) {verdict}")  # fmt: skip


async def main_async(args: argparse.Namespace) -> None:
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

        line("full scan, nothing changed", *await paired(args.runs, steady, root), 2.5)
        line("cold scan (store read + ignore)", *await paired(args.runs, cold, root), 2.5)

        changed = paths[::100]
        originals = {p: (root / p).read_bytes() for p in changed}
        for path, data in originals.items():
            (root / path).write_bytes(data[::-1])  # same size, other content

        async def one_percent() -> float:
            started = time.perf_counter()
            summary = await workspace.drift.scan()
            assert summary.drifted == len(changed), summary
            return time.perf_counter() - started

        line("full scan, 1 % changed", *await paired(args.runs, one_percent, root), 2.5)

        known = changed[:100]
        samples = []
        for _ in range(args.runs):
            started = time.perf_counter()
            await workspace.drift.recheck(known)
            samples.append(time.perf_counter() - started)
        print(f"{'re-check of 100 known changes':<34} {statistics.median(samples) * 1000:8.1f} ms"
              "   (target <= 50 ms; O(N), not O(tree))")  # fmt: skip
        for path, data in originals.items():
            (root / path).write_bytes(data)
        await workspace.drift.scan()

        latencies = []
        for attempt in range(args.runs):
            target = paths[attempt * 7 % len(paths)]
            found = asyncio.get_running_loop().create_future()

            def listener(changes: dict[str, object], target: str = target,
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
        print(f"{'change -> finding (on-demand scan)':<34} "
              f"{statistics.median(latencies) * 1000:8.1f} ms   (+ up to driftInterval "
              "when found by the periodic scan)")  # fmt: skip
    finally:
        await workspace.close()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", help="generate the tree here (or reuse one made before)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

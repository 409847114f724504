"""The language server against a minimal pygls server, measured in the same run.

Run from the repository root: python bench/bench_lsp.py [--quick] [--only PART]

Figures and targets (issue: the daemon's performance):
  start -> initialize result        <= 1.0x the minimal server (it starts like one; the
                                    first start with an editor, which loads the server to
                                    answer and keeps the answer, is printed without a target)
  idle RSS                          <= 1.5x the minimal server
  didSave absorbed per second       >= 5,000/s (pygls' default stdin reader caps near 1,000/s)
  didSave -> committed, beyond the debounce: p99 <= 10 ms (of the saves after the session's
                                    first, which is printed on its own)
  20,000-path watched-files burst committed <= 1.2 s beyond the debounce, while a request
  sent during the burst is answered within 100 ms (the PSG's file nodes follow once the
  burst is stored; the time until they all exist is printed too, without a target; so is
  the server's CPU time for the burst, beside the minimal server's for as many didSave: on
  a shared machine it follows the load far less than the elapsed time). The 1.2 s was the
  first release's figure on the machine it was measured on: the same burst is also run by
  the first release, built from this repository's history (benchlib/baseline.py; the first
  run builds it, a minute or two, and later runs reuse it), in the same run, with the same
  client and files: this code's burst <= 1.0x the first release's. --release REV picks
  another commit, --release none leaves it out (--quick leaves it out unless given).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.baseline import FIRST_RELEASE, ReleaseUnavailable, describe, release_python
from benchlib.harness import Bench, percentile
from benchlib.jsonrpc_client import minimal_cmd, mplp_cmd, save, started, wait_ready
from benchlib.save_latency import bare_client_saves
from benchlib.stored import StoredCount

MINIMAL = minimal_cmd()
QUIET_MS = 100
GIVE_UP_S = 300.0
# VS Code's watcher: registered dynamically, with relative patterns (LSP 3.17). Without the
# latter the server watches the folder itself, and the burst would be reported twice.
VSCODE_CAPS = {
    "workspace": {
        "didChangeWatchedFiles": {"dynamicRegistration": True, "relativePatternSupport": True}
    }
}


def count(database: Path, sql: str, params: tuple[str, ...] = ()) -> int:
    try:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            return int(conn.execute(sql, params).fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


async def reached(done: Callable[[], bool], what: str, poll_s: float) -> None:
    """Wait for ``done``; a run that never gets there is an error, not a hang."""
    give_up = time.perf_counter() + GIVE_UP_S
    while not done():
        if time.perf_counter() > give_up:
            raise SystemExit(f"bench_lsp: burst: {what} not reached in {GIVE_UP_S:.0f} s")
        await asyncio.sleep(poll_s)


async def bench_start_and_rss(bench: Bench, runs: int, idle: float, tmp: Path) -> None:
    # The answer to initialize kept by a start is the next start's (lsp/handshake.py): the
    # first start with an editor is measured once on its own, every later one as usual.
    os.environ["MPLP_LSP_CACHE_DIR"] = str(tmp / "cache")
    (tmp / "workspace-first").mkdir(parents=True)
    client, first = await started(mplp_cmd(tmp / "state-first"), tmp / "workspace-first")
    await client.stop()
    mine, peer, mine_rss, peer_rss = [], [], [], []
    mine_cpu, peer_cpu = [], []
    for run in range(runs):
        client, seconds = await started(MINIMAL, tmp)
        peer.append(seconds)
        peer_cpu.append(client.cpu_ms())
        await asyncio.sleep(idle)
        peer_rss.append(client.rss_mib())
        await client.stop()
        # A workspace of its own, its store beside it: a store folder of an earlier run inside
        # the workspace would be another workspace's store to the daemon, and cost memory.
        workspace = tmp / f"workspace-{run}"
        workspace.mkdir(parents=True)
        client, seconds = await started(mplp_cmd(tmp / f"state-start-{run}"), workspace)
        mine.append(seconds)
        mine_cpu.append(client.cpu_ms())  # nothing runs between the answer and initialized
        await wait_ready(client)
        await asyncio.sleep(idle)
        mine_rss.append(client.rss_mib())
        await client.stop()
    a, b = statistics.median(mine) * 1000, statistics.median(peer) * 1000
    bench.figure(
        "start -> initialize result",
        a,
        "ms",
        target="<= 1.0x the minimal server",
        met=a <= b,
        peer=("minimal pygls server", b),
    )
    bench.figure(
        "  the first start with an editor (no answer kept yet)",
        first * 1000,
        "ms",
        peer=("minimal pygls server", b),
    )
    a, b = statistics.median(mine_cpu), statistics.median(peer_cpu)
    bench.figure(
        "  CPU time to the initialize result",
        a,
        "ms",
        peer=("minimal pygls server", b),
    )
    a, b = statistics.median(mine_rss), statistics.median(peer_rss)
    bench.figure(
        "idle RSS",
        a,
        "MiB",
        target="<= 1.5x the minimal server",
        met=a <= 1.5 * b,
        peer=("minimal pygls server", b),
    )


async def bench_save_rate(bench: Bench, tmp: Path, count: int) -> None:
    workspace = tmp / "rate"
    (workspace / "src").mkdir(parents=True)
    uris = []
    for i in range(200):
        path = workspace / "src" / f"f{i}.py"
        path.write_text("x\n")
        uris.append(path.as_uri())
    rates = {}
    for name, cmd, barrier in (
        ("minimal", MINIMAL, "bench/stats"),
        ("mplp", mplp_cmd(tmp / "state-rate"), "mplp/status"),
    ):
        client, _ = await started(cmd, workspace, {"mplp": {"debounceMs": QUIET_MS}})
        if name == "mplp":
            await wait_ready(client)
        begin = time.perf_counter()
        for i in range(count):
            save(client, uris[i % len(uris)])
        await client.request(barrier)
        rates[name] = count / (time.perf_counter() - begin)
        await client.stop()
    bench.figure(
        f"didSave absorbed ({count:,})",
        rates["mplp"],
        "/s",
        target=">= 5,000/s",
        met=rates["mplp"] >= 5000,
        peer=("minimal pygls server", rates["minimal"]),
    )


async def bench_latency(bench: Bench, tmp: Path, samples: int) -> None:
    # One save more than the samples: the first is printed on its own. It is the session's
    # first activity, which has the validators compiled in its quiet period (an idle daemon
    # does not hold them: intake.Intake.prepare); with a 100 ms quiet period on a slow
    # machine the compile can outlast it.
    first, *stored = await bare_client_saves(tmp / "latency", samples + 1, QUIET_MS)
    bench.figure(
        f"the session's first didSave -> committed beyond the {QUIET_MS} ms debounce",
        first - QUIET_MS,
        "ms",
    )
    beyond = [ms - QUIET_MS for ms in stored]
    workspace = tmp / "latency" / "peer"
    peer_client, _ = await started(MINIMAL, workspace)
    pings = []
    for _ in range(samples):
        begin = time.perf_counter()
        await peer_client.request("bench/stats")
        pings.append((time.perf_counter() - begin) * 1000)
    await peer_client.stop()
    bench.figure(
        f"didSave -> committed beyond the {QUIET_MS} ms debounce, p50",
        percentile(beyond, 0.5),
        "ms",
        peer=("minimal server request round trip, p50", percentile(pings, 0.5)),
    )
    bench.figure(
        f"didSave -> committed beyond the {QUIET_MS} ms debounce, p99",
        percentile(beyond, 0.99),
        "ms",
        target="<= 10 ms",
        met=percentile(beyond, 0.99) <= 10,
        peer=("minimal server request round trip, p99", percentile(pings, 0.99)),
    )


@dataclass
class Burst:
    """One burst, from its notification: every path stored (beyond the debounce), the server's
    CPU time until then, a request sent during it, and every file node in the graph."""

    stored: float
    cpu: float
    answered_ms: float
    graphed: float


def burst_files(workspace: Path, files: int) -> list[dict[str, Any]]:
    """New files, and the watcher's report of each."""
    changes = []
    for i in range(files):
        path = workspace / "src" / f"b{i}.txt"
        path.write_text(str(i))
        changes.append({"uri": path.as_uri(), "type": 1})
    return changes


async def one_burst(python: str, tmp: Path, files: int) -> Burst:
    """A burst reported to the server that ``python`` runs (this checkout's, or an earlier
    release's: the same client, the same files)."""
    workspace = tmp / "burst"
    (workspace / "src").mkdir(parents=True)
    state = tmp / "state-burst"
    cmd = [python, *mplp_cmd(state)[1:]]
    client, _ = await started(cmd, workspace, {"mplp": {"debounceMs": QUIET_MS}}, VSCODE_CAPS)
    await wait_ready(client)
    # Written once the server records the folder: files there before it started are its
    # baseline (known to the graph, so a "created" report of them changes nothing).
    changes = burst_files(workspace, files)
    cpu_before = client.cpu_ms()
    begin = time.perf_counter()
    client.notify("workspace/didChangeWatchedFiles", {"changes": changes})
    await asyncio.sleep(0.05)
    asked = time.perf_counter()
    await client.request("mplp/status")
    answered = (time.perf_counter() - asked) * 1000
    stored = StoredCount(state / "events.db")
    await reached(lambda: stored.count() >= files, "every path stored", 0.01)
    stored.close()
    total = time.perf_counter() - begin - QUIET_MS / 1000
    cpu = (client.cpu_ms() - cpu_before) / 1000
    graphed = "SELECT COUNT(*) FROM psg_files"
    await reached(lambda: count(state / "events.db", graphed) >= files, "every file node", 0.05)
    graph = time.perf_counter() - begin - QUIET_MS / 1000
    await client.stop()
    return Burst(total, cpu, answered, graph)


async def minimal_absorbs(tmp: Path, files: int) -> tuple[float, float]:
    """Seconds and CPU seconds the minimal server takes to absorb a didSave of each file."""
    workspace = tmp / "burst"
    (workspace / "src").mkdir(parents=True)
    changes = burst_files(workspace, files)
    peer, _ = await started(MINIMAL, workspace)
    cpu_before = peer.cpu_ms()
    begin = time.perf_counter()
    for change in changes:
        save(peer, change["uri"])
    await peer.request("bench/stats")
    seconds = time.perf_counter() - begin
    cpu = (peer.cpu_ms() - cpu_before) / 1000
    await peer.stop()
    return seconds, cpu


async def bench_burst(
    bench: Bench, tmp: Path, files: int, release: tuple[str, Path] | None, first: bool
) -> None:
    """This checkout's burst, the minimal server's didSave of as many files and, with
    ``release`` (its name and interpreter), an earlier release's burst, one after the other
    in the same run: the release ``first`` or after this code, alternately from run to run,
    so the machine's drift over a run favours neither."""
    theirs = None
    if release is not None and first:
        theirs = await one_burst(str(release[1]), tmp / "release", files)
    mine = await one_burst(sys.executable, tmp / "mine", files)
    if release is not None and not first:
        theirs = await one_burst(str(release[1]), tmp / "release", files)
    peer_seconds, peer_cpu = await minimal_absorbs(tmp / "minimal", files)
    bench.figure(
        f"{files:,}-path watched-files burst committed, beyond the debounce",
        mine.stored,
        "s",
        target="<= 1.2 s",
        met=mine.stored <= 1.2,
        peer=(f"minimal server absorbs {files:,} didSave", peer_seconds),
    )
    if release is not None and theirs is not None:
        bench.figure(
            "  the same burst beside the release the 1.2 s was measured on",
            mine.stored,
            "s",
            target="<= 1.0x",
            met=mine.stored <= theirs.stored,
            peer=(f"{release[0]}{', run first' if first else ''}", theirs.stored),
        )
        bench.figure(
            "  the server's CPU time until every path is stored, beside the release's",
            mine.cpu,
            "s",
            peer=(release[0], theirs.cpu),
        )
    bench.figure(
        "  the server's CPU time until every path is stored",
        mine.cpu,
        "s",
        peer=(f"minimal server's CPU time absorbing {files:,} didSave", peer_cpu),
    )
    bench.figure(
        "  a request sent during the burst answered in",
        mine.answered_ms,
        "ms",
        target="<= 100 ms",
        met=mine.answered_ms <= 100,
    )
    bench.figure("  PSG file nodes complete, beyond the debounce", mine.graphed, "s")


def release_interpreter(rev: str) -> tuple[str, Path] | None:
    """The name and interpreter of the release ``rev`` (built now, or kept from an earlier
    run), or None, saying why, when there is none to run."""
    if rev == "none":
        return None
    try:
        return describe(rev), release_python(rev)
    except ReleaseUnavailable as missing:
        print(f"{describe(rev)} is left out of the burst: {missing}", flush=True)
        return None


PARTS = ["start", "saves", "latency", "burst"]


async def run(bench: Bench, args: argparse.Namespace) -> None:
    chosen = set(args.only or PARTS)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if "start" in chosen:
            await bench_start_and_rss(bench, args.runs, args.idle, tmp)
        if "saves" in chosen:
            await bench_save_rate(bench, tmp, args.saves)
        if "latency" in chosen:
            await bench_latency(bench, tmp, args.samples)
        if "burst" in chosen:
            release = release_interpreter(args.release)
            for index in range(args.runs):
                first = index % 2 == 1
                await bench_burst(bench, tmp / f"burst-{index}", args.files, release, first)


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--runs", full=3, quick=1, help="start-ups, and bursts, to take the median of")
    bench.size("--idle", full=2.0, quick=0.2, help="seconds idle after a start, before its RSS")
    bench.size("--files", full=20_000, quick=50, help="paths in the watched-files burst")
    bench.size("--saves", full=20_000, quick=200, help="didSave notifications for the rate")
    bench.size(
        "--samples",
        full=300,
        quick=5,
        help="saves timed for the latency, after the first (a p99 of 100 would be the maximum)",
    )
    bench.parser.add_argument(
        "--release",
        metavar="REV",
        help=f"the release to run the same burst with, in the same run, built from this "
        f"repository's history (default: the first release, {FIRST_RELEASE[:7]}, the one the "
        f"1.2 s target was measured on; with --quick: none); 'none' leaves it out",
    )
    bench.parser.add_argument(
        "--only",
        choices=PARTS,
        action="append",
        help="run only these benchmarks (repeatable); all by default",
    )
    with bench.run() as args:
        if args.release is None:
            args.release = "none" if bench.quick else FIRST_RELEASE
        asyncio.run(run(bench, args))


if __name__ == "__main__":
    main()

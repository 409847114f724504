"""Resource soak of ``mplp-lsp watch``: idle and under a steady 10 events/s, side by side.

The editor-facing daemon (``serve``) has its own soak with a minimal pygls server as the peer
(bench/soak.py); this one soaks the command-line daemon. It starts ``mplp-lsp watch`` (the full engine: file watcher, Git poller, periodic drift scans,
the loopback API) on a fresh Git workspace and samples the process from /proc: CPU time, RSS,
open file descriptors, and the store's size on disk. In ``load`` mode it modifies one of 100
files every 0.1 s, so each file is quiet for 10 s between changes and every change becomes
one file_update (plus its graph_update): 10 file events per second.

Targets (issue: hardening): idle CPU < 1 %, RSS growth < 5 % after warm-up, no fd leak.
``--mode both`` runs an idle and a loaded daemon side by side for the same duration.

    python bench/soak_watch.py [--quick] [--minutes 60] [--mode both]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.harness import Bench

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
FILES = 100


@dataclass
class Sample:
    at: float
    cpu: float  # seconds of CPU used by the daemon so far
    rss: int  # bytes
    fds: int
    store: int  # bytes of events.db + WAL


@dataclass
class Run:
    mode: str
    workspace: Path
    state: Path
    process: subprocess.Popen[bytes]
    samples: list[Sample] = field(default_factory=list)
    events_written: int = 0


def sample(run: Run) -> Sample:
    pid = run.process.pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    store = sum(path.stat().st_size for path in run.state.glob("events.db*") if path.is_file())
    return Sample(time.monotonic(), cpu, rss, fds, store)


def start(mode: str, root: Path) -> Run:
    workspace, state = root / f"{mode}-ws", root / f"{mode}-state"
    (workspace / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    for index in range(FILES):
        (workspace / "src" / f"f{index}.txt").write_text("0\n")
    log = root / f"{mode}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "mplp_lsp", "watch", str(workspace), "--state-dir", str(state),
         "--log-file", str(log), "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return Run(mode, workspace, state, process)


def load(run: Run, stop: threading.Event) -> None:
    index = 0
    next_at = time.monotonic()
    while not stop.is_set():
        path = run.workspace / "src" / f"f{index % FILES}.txt"
        path.write_text(f"{index}\n")
        run.events_written += 1
        index += 1
        next_at += 0.1
        stop.wait(max(0.0, next_at - time.monotonic()))


def report(run: Run, seconds: float, warm_up: float) -> None:
    warm = [s for s in run.samples if s.at - run.samples[0].at >= warm_up] or run.samples
    first, last = warm[0], warm[-1]
    span = max(last.at - first.at, 1e-9)
    cpu = (last.cpu - first.cpu) / span * 100
    growth = (last.rss - first.rss) / first.rss * 100
    peak = max(s.rss for s in warm)
    print(
        f"{run.mode:5s} {seconds / 60:5.1f} min: CPU {cpu:5.2f} % of a core "
        f"(target idle < 1 %); RSS {first.rss / 2**20:6.1f} -> {last.rss / 2**20:6.1f} MiB "
        f"({growth:+5.2f} %, peak {peak / 2**20:6.1f} MiB; target growth < 5 %); "
        f"fds {first.fds} -> {last.fds} (target: no leak); store "
        f"{first.store / 2**20:6.2f} -> {last.store / 2**20:6.2f} MiB; "
        f"file changes written {run.events_written}"
    )
    every = max(1, len(warm) // 6)
    trail = ", ".join(
        f"{(s.at - first.at) / 60:.0f} min {s.rss / 2**20:.1f}" for s in [*warm[::every], last]
    )
    print(f"{run.mode:5s} RSS after warm-up (MiB): {trail}")


def main() -> int:
    bench = Bench(__doc__)
    bench.size("--minutes", full=60.0, quick=0.1, help="minutes sampled")
    bench.size("--start-up", full=5.0, quick=1.0, help="seconds left out: start-up, first scan")
    bench.size("--warm-up", full=60.0, quick=1.0, help="seconds sampled but not judged")
    bench.size("--every", full=10.0, quick=1.0, help="seconds between samples")
    bench.parser.add_argument("--mode", choices=["idle", "load", "both"], default="both")
    with bench.run() as args:
        return soak(args)


def soak(args: argparse.Namespace) -> int:
    modes = ["idle", "load"] if args.mode == "both" else [args.mode]
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="mplp-soak-") as name:
        root = Path(name)
        runs = [start(mode, root) for mode in modes]
        stop = threading.Event()
        time.sleep(args.start_up)  # start-up and the first drift scan are not the steady state
        loaders = [
            threading.Thread(target=load, args=(run, stop), daemon=True)
            for run in runs
            if run.mode == "load"
        ]
        for thread in loaders:
            thread.start()
        began = time.monotonic()
        try:
            while time.monotonic() - began < seconds:
                for run in runs:
                    if run.process.poll() is not None:
                        print(f"{run.mode}: the daemon exited with {run.process.returncode}")
                        return 1
                    run.samples.append(sample(run))
                time.sleep(min(args.every, max(0.0, seconds - (time.monotonic() - began))))
            for run in runs:
                run.samples.append(sample(run))
        finally:
            stop.set()
            for run in runs:
                run.process.terminate()
                run.process.wait(30)
        for run in runs:
            report(run, seconds, args.warm_up)
    return 0


if __name__ == "__main__":
    sys.exit(main())

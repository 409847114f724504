"""`mplp-lsp events` on a store of a million events, beside the sqlite3 shell on the same file.

Run from the repository root: python bench/bench_events.py [--events N] [--store DIR]

The bench builds a store as a user of the previous release has it (bench/benchlib/event_store.py: a
year of file changes, graph updates, commits, tool and CI runs, one event in a hundred
reported late), opens it with this release (the upgrade to event-time order: its time, and
that no row changed), brings the package's bytecode up to date as an install does, then
runs each command as a user does (the installed ``mplp-lsp`` script), in a pipe that closes
after the lines it wants, and measures from the process's start:

  events | head -1, events --json | head -1, events --limit 10, events --kind ci | head -1
      first line <= 100 ms; peak RSS <= 100 MB
  events --json > /dev/null (the whole log)
      peak RSS <= 100 MB (flat in the store's size); its rate is printed without a target

The peer is the sqlite3 shell reading the first event in time order from the same file
(`sqlite3 events.db 'select body ... limit 1'`; Python's sqlite3 module in a fresh process
when the shell is not installed); beside it, the floor of any Python command reading a store
(the interpreter and the standard modules events uses). `--store DIR` keeps the built store in DIR and reuses it
when it is there (then the upgrade is not measured again).
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib.event_store import PREVIOUS_SCHEMA, build_store
from benchlib.harness import Bench

FIRST_LINE_MS = 100.0
RSS_MB = 100.0
RUNS = 5
PEER_SQL = "SELECT body FROM events ORDER BY occurred_at, seq LIMIT 1"
# What any Python command line reading a store pays before its own code: the interpreter and
# the standard modules events uses (printed beside the figures, without a target).
PYTHON_FLOOR = [
    sys.executable,
    "-c",
    "import argparse, dataclasses, json, logging, pathlib, sqlite3, typing; print(1)",
]

bench = Bench(__doc__)
bench.size("--events", full=1_000_000, quick=5_000, help="events in the store")
bench.parser.add_argument("--store", type=Path, help="build the store here, or reuse it")


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set since it started (VmHWM). Not the rusage of a reaped
    child: a child forked from this process counts this process's pages until its exec."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found[1]) if found else 0


def first_line(argv: list[str], lines: int = 1) -> tuple[float, float, int]:
    """Start ``argv``, read ``lines`` lines, close the pipe: (ms to the first line, ms to the
    last one read, peak RSS in KiB until then)."""
    began = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdout is not None
    first = last = 0.0
    for index in range(lines):
        if not child.stdout.readline():
            if index == 0:  # a command that printed nothing measured nothing
                child.wait()
                raise SystemExit(f"printed nothing (exit {child.returncode}): {' '.join(argv)}")
            break
        last = (time.perf_counter() - began) * 1000
        if index == 0:
            first = last
    rss = peak_rss_kib(child.pid)  # still alive: blocked writing the next line
    child.stdout.close()  # as `head` does: the writer gets EPIPE
    child.wait()
    return first, last, rss


def whole_log(argv: list[str]) -> tuple[float, int, int]:
    """Run ``argv`` to its end with its output thrown away: (seconds, lines, peak RSS KiB,
    read from the process now and then while it runs)."""
    began = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdout is not None
    count = rss = 0
    while chunk := child.stdout.read(1 << 20):
        count += chunk.count(b"\n")
        rss = max(rss, peak_rss_kib(child.pid))
    child.wait()
    if not count:
        raise SystemExit(f"printed nothing (exit {child.returncode}): {' '.join(argv)}")
    return time.perf_counter() - began, count, rss


def compiled_package() -> str:
    """Bring the measured package's bytecode up to date, as installing it does (pip compiles
    every module), and say so. A development tree edited since its last import would
    otherwise be compiled again by every measured run where PYTHONDONTWRITEBYTECODE is set:
    a cost no user of an installed package pays."""
    import compileall

    import mplp_lsp

    package = Path(mplp_lsp.__file__).parent
    if compileall.compile_dir(package, quiet=1):
        return f"{package} compiled, as an install compiles it"
    return f"{package} could not be compiled: its modules may be compiled at each start"


def peer_argv(database: Path) -> tuple[str, list[str]]:
    shell = shutil.which("sqlite3")
    if shell is not None:
        return "sqlite3 shell", [shell, "-readonly", str(database), PEER_SQL]
    code = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]);"
        f" print(c.execute({PEER_SQL!r}).fetchone()[0])"
    )
    return "python -c sqlite3", [sys.executable, "-c", code, str(database)]


def schema(database: Path) -> int:
    conn = sqlite3.connect(database)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def upgrade(database: Path) -> None:
    from mplp_lsp.store.database import SCHEMA_VERSION, connect

    conn = sqlite3.connect(database)
    count, size = conn.execute("SELECT count(*), sum(length(body)) FROM events").fetchone()
    conn.close()
    began = time.perf_counter()
    connect(database).close()
    took = time.perf_counter() - began
    conn = sqlite3.connect(database)
    after = conn.execute("SELECT count(*), sum(length(body)) FROM events").fetchone()
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    assert after == (count, size) and version == SCHEMA_VERSION, (after, version)
    bench.figure(
        f"upgrade from schema {PREVIOUS_SCHEMA} (event-time column and index), rows unchanged",
        took,
        "s",
    )


def main() -> None:
    with bench.run() as args:
        temporary = None
        folder = args.store
        if folder is None:
            temporary = tempfile.TemporaryDirectory(prefix="bench-events-")
            folder = Path(temporary.name)
        folder.mkdir(parents=True, exist_ok=True)
        database = folder / "events.db"
        try:
            if not database.exists():
                took = build_store(database, events=args.events)
                size = database.stat().st_size / 2**20
                bench.figure(f"built {args.events:,} events ({size:,.0f} MiB)", took, "s")
            if schema(database) == PREVIOUS_SCHEMA:
                upgrade(database)
            measure(folder, database)
        finally:
            if temporary is not None:
                temporary.cleanup()


def measure(folder: Path, database: Path) -> None:
    # The command a user types (the installed script), not ``python -m``, whose runpy costs a
    # user nothing.
    command = Path(sys.executable).with_name("mplp-lsp")
    if not command.is_file():
        bench.unavailable(f"no mplp-lsp command beside {sys.executable}: install the package")
    base = [str(command), "events", "--state-dir", str(folder), "--workspace", str(folder)]
    print(f"bytecode: {compiled_package()}")
    peer_name, peer = peer_argv(database)
    peer_ms = [first_line(peer)[0] for _ in range(RUNS)]
    if not all(peer_ms):
        raise SystemExit(f"the peer printed nothing: {' '.join(peer)}")
    peer_first = statistics.median(peer_ms)
    floor = statistics.median(first_line(PYTHON_FLOOR)[0] for _ in range(RUNS))
    print(f"(each figure: the median of {RUNS} runs)")
    bench.figure(
        "the floor of a Python command (interpreter + the stdlib events uses)", floor, "ms"
    )
    cases = {
        "events | head -1": ([], 1),
        "events --json | head -1": (["--json"], 1),
        "events --limit 10": (["--limit", "10"], 10),
        "events --kind ci | head -1": (["--kind", "ci"], 1),
    }
    for name, (extra, lines) in cases.items():
        runs = [first_line([*base, *extra], lines) for _ in range(RUNS)]
        first = statistics.median(r[0] for r in runs)
        rss = max(r[2] for r in runs) / 1024
        bench.figure(
            f"{name}: first line",
            first,
            "ms",
            target=f"<= {FIRST_LINE_MS:.0f} ms",
            met=first <= FIRST_LINE_MS,
            peer=(peer_name, peer_first),
        )
        if lines > 1:
            bench.figure(f"{name}: last line", statistics.median(r[1] for r in runs), "ms")
        bench.figure(
            f"{name}: peak RSS", rss, "MiB", target=f"<= {RSS_MB:.0f} MiB", met=rss <= RSS_MB
        )
    seconds, count, rss_kib = whole_log([*base, "--json"])
    rss = rss_kib / 1024
    bench.figure("events --json > /dev/null: the whole log", seconds, "s")
    bench.figure("events --json: lines per second", count / seconds, "lines/s")
    bench.figure(
        "events --json: peak RSS over the whole log",
        rss,
        "MiB",
        target=f"<= {RSS_MB:.0f} MiB",
        met=rss <= RSS_MB,
    )


if __name__ == "__main__":
    main()

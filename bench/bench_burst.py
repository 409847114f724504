"""Burst benchmark for ``mplp-lsp watch``: a 100,000-file tree extracted into a watched folder.

A generated source tree (bench/benchlib/drift_tree.py: 100 files per directory, two levels) is
written as ``git archive HEAD | tar x`` writes it into the folder a real ``mplp-lsp watch``
process records. Printed, from one run:

* files recorded / files on disk (target: 100 %): distinct paths with a stored
  ``file_update`` against ``find -type f`` on the extracted tree, and paths stored more than
  once (target: 0);
* the time from the start of the extraction until the last file event is stored, beside two
  peers measured in the same run on the same tree: the extraction itself (``tar x``), and
  ``find DIR -type f | wc -l``.

    python bench/bench_burst.py [--quick] [--files N] [--tree DIR] [--timeout 600]

A file not recorded, or recorded twice, fails the run (exit status 1), --quick included.
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchlib.drift_tree import make_tree
from benchlib.harness import Bench


def stored(database: Path) -> tuple[int, int, float | None]:
    """Distinct paths with a file event, events in all, and the latest one's receipt time."""
    if not database.exists():
        return 0, 0, None
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        row = conn.execute(
            "SELECT COUNT(DISTINCT json_extract(body, '$.payload.file_path')), COUNT(*), "
            "MAX(received_at) FROM events WHERE kind = 'file_update'"
        ).fetchone()
    except sqlite3.OperationalError:
        return 0, 0, None
    finally:
        conn.close()
    latest = datetime.fromisoformat(row[2].replace("Z", "+00:00")).timestamp() if row[2] else None
    return int(row[0]), int(row[1]), latest


def timed(command: str) -> tuple[float, str]:
    started = time.perf_counter()
    output = subprocess.run(command, shell=True, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, output.stdout.strip()


def main() -> int:
    bench = Bench(__doc__)
    bench.size("--files", full=100_000, quick=200, help="files in the extracted tree")
    bench.parser.add_argument("--tree", type=Path, help="reuse (or create) the source tree here")
    bench.parser.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    with bench.run() as args:
        return burst(bench, args)


def burst(bench: Bench, args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="mplp-burst-") as scratch:
        base = Path(scratch)
        tree = args.tree or base / "tree"
        make_tree(tree, args.files)
        archive = base / "tree.tar"
        subprocess.run(["git", "-C", str(tree), "archive", "-o", str(archive), "HEAD"], check=True)
        workspace, state = base / "watched", base / "state"
        workspace.mkdir()
        subprocess.run(["git", "init", "-q", str(workspace)], check=True)
        daemon = subprocess.Popen(
            [sys.executable, "-m", "mplp_lsp", "watch", str(workspace), "--no-api",
             "--state-dir", str(state), "--log-level", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert daemon.stderr is not None
            daemon.stderr.readline()  # "watching ...": every directory is watched
            wall = time.time()
            extract, _ = timed(f"tar x -f {archive} -C {workspace}")
            find, on_disk_text = timed(
                f"find {workspace} -path '*/.git' -prune -o -type f -print | wc -l"
            )
            on_disk = int(on_disk_text)
            deadline = time.monotonic() + args.timeout
            quiet_since, last = time.monotonic(), (0, 0)
            while time.monotonic() < deadline:
                recorded, events, latest = stored(state / "events.db")
                if (recorded, events) != last:
                    last, quiet_since = (recorded, events), time.monotonic()
                if recorded >= on_disk or time.monotonic() - quiet_since > 30:
                    break
                time.sleep(0.5)
            recorded, events, latest = stored(state / "events.db")
            alive = daemon.poll() is None
        finally:
            daemon.send_signal(signal.SIGINT)
            daemon.wait(timeout=120)
            if daemon.stderr is not None:
                daemon.stderr.close()

    until_last = (latest - wall) if latest is not None else float("nan")
    print(f"files on disk (find -type f, without .git): {on_disk:,}")
    print(
        f"files recorded: {recorded:,} / {on_disk:,} = {100 * recorded / on_disk:.2f} % "
        f"(target 100 %); paths stored more than once: {events - recorded} (target 0)"
    )
    print(f"daemon alive at the end: {alive}")
    bench.figure(
        "extraction start -> last file event stored",
        until_last,
        "s",
        peer=("tar x of the tree", extract),
    )
    bench.figure("  the same, beside another peer", until_last, "s", peer=("find | wc -l", find))
    return 0 if recorded == on_disk and events == recorded and alive else 1


if __name__ == "__main__":
    raise SystemExit(main())

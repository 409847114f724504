"""Burst benchmark for ``mplp-lsp watch``: a 100,000-file tree written into a watched folder,
and half of a 100,000-file repository that was there before the daemon started deleted.

The tree is generated (bench/benchlib/drift_tree.py: 100 files per directory, two levels).
Printed, from one run:

extract: ``git archive HEAD | tar x`` of the tree into the folder a real ``mplp-lsp watch``
  records:
  * files recorded / files on disk (target: 100 %): distinct paths with a stored
    ``file_update`` against ``find -type f`` on the extracted tree, and paths stored more
    than once (target: 0);
  * the time from the start of the extraction until the last file event is stored, beside
    two peers measured in the same run on the same tree: the extraction itself (``tar x``),
    and ``find DIR -type f | wc -l``.

delete: a clone of the tree's repository (files and history there before the daemon
  starts), recorded by a real ``mplp-lsp watch``; once its baseline is learnt, ``rm -rf`` of
  half of its top-level folders:
  * the baseline: the time until the graph knows every file, and the events it stored
    (target: one graph_update, no file_update), beside ``git ls-files -s`` and ``find``;
  * deletions recorded / files deleted (target: 100 %), and any other file event (target:
    none: the untouched half is not reported);
  * the time from the start of ``rm -rf`` to the last deletion stored, beside ``rm -rf``;
  * the daemon's peak RSS while deleting, against its RSS once the baseline is learnt
    (target: below 1.5x).

    python bench/bench_burst.py [--quick] [--files N] [--tree DIR] [--timeout 600]
                                [--only extract|delete]

A file not recorded, recorded twice, a deletion not recorded or an event for an untouched file
fails the run (exit status 1), --quick included; --quick does not judge the RSS target.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from benchlib.drift_tree import make_tree
from benchlib.harness import Bench

RSS_TARGET = 1.5


def query(database: Path, sql: str) -> tuple[object, ...]:
    if not database.exists():
        return ()
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        return tuple(conn.execute(sql).fetchone())
    except sqlite3.OperationalError:
        return ()
    finally:
        conn.close()


def stored(database: Path, change: str | None = None) -> tuple[int, int, float | None]:
    """Distinct paths with a file event (of ``change``, if given), those events in all, and
    the latest one's receipt time."""
    which = f"AND json_extract(body, '$.payload.change_type') = '{change}'" if change else ""
    row = query(
        database,
        "SELECT COUNT(DISTINCT json_extract(body, '$.payload.file_path')), COUNT(*), "
        f"MAX(received_at) FROM events WHERE kind = 'file_update' {which}",
    )
    if not row:
        return 0, 0, None
    latest = str(row[2])
    when = datetime.fromisoformat(latest.replace("Z", "+00:00")).timestamp() if row[2] else None
    return int(str(row[0])), int(str(row[1])), when


def count(database: Path, sql: str) -> int:
    row = query(database, sql)
    return int(str(row[0])) if row else 0


def timed(command: str) -> tuple[float, str]:
    started = time.perf_counter()
    output = subprocess.run(command, shell=True, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, output.stdout.strip()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def settled_rss(pid: int, quiet: float = 3.0) -> int:
    """The RSS once it has not grown for ``quiet`` seconds (the drift scan after the
    baseline loads the recorded facts it keeps)."""
    last, since = rss_kib(pid), time.monotonic()
    while time.monotonic() - since < quiet:
        time.sleep(0.2)
        now = rss_kib(pid)
        if now > last:
            last, since = now, time.monotonic()
    return last


class PeakRss:
    """The highest RSS of a process, sampled every 50 ms while the block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_kib(self.pid))
            except OSError:
                return
            self._stop.wait(0.05)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def start_watch(workspace: Path, state: Path) -> subprocess.Popen[bytes]:
    """A real ``mplp-lsp watch``, once it prints "watching" (every directory is watched and
    the graph knows the files that were there); its stderr goes to a file beside the store
    (a pipe nobody reads would stop it at the first screenful of warnings)."""
    log = state.parent / f"{state.name}.log"
    with log.open("wb") as sink:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "mplp_lsp", "watch", str(workspace), "--no-api",
             "--state-dir", str(state), "--log-level", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )  # fmt: skip
    while b"watching" not in log.read_bytes() and daemon.poll() is None:
        time.sleep(0.05)
    return daemon


def stop_watch(daemon: subprocess.Popen[bytes]) -> None:
    daemon.send_signal(signal.SIGINT)
    daemon.wait(timeout=120)


def wait_for(done: Callable[[], tuple[bool, object]], timeout: float, quiet: float = 30.0) -> None:
    """Poll ``done()`` (-> (finished, progress)) until it finishes, nothing moves for
    ``quiet`` seconds, or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    quiet_since, last = time.monotonic(), None
    while time.monotonic() < deadline:
        finished, progress = done()
        if progress != last:
            last, quiet_since = progress, time.monotonic()
        if finished or time.monotonic() - quiet_since > quiet:
            return
        time.sleep(0.2)


def bench_extract(bench: Bench, base: Path, tree: Path, timeout: float) -> bool:
    archive = base / "tree.tar"
    subprocess.run(["git", "-C", str(tree), "archive", "-o", str(archive), "HEAD"], check=True)
    workspace, state = base / "watched", base / "state-extract"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    daemon = start_watch(workspace, state)
    try:
        wall = time.time()
        extract, _ = timed(f"tar x -f {archive} -C {workspace}")
        find, on_disk_text = timed(
            f"find {workspace} -path '*/.git' -prune -o -type f -print | wc -l"
        )
        on_disk = int(on_disk_text)
        database = state / "events.db"
        wait_for(lambda: (stored(database)[0] >= on_disk, stored(database)[:2]), timeout)
        recorded, events, latest = stored(database)
        alive = daemon.poll() is None
    finally:
        stop_watch(daemon)
    until_last = (latest - wall) if latest is not None else float("nan")
    print("== extract: a tree written into a watched folder")
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
    return recorded == on_disk and events == recorded and alive


def bench_delete(bench: Bench, base: Path, tree: Path, timeout: float) -> bool:
    workspace, state = base / "existing", base / "state-delete"
    subprocess.run(["git", "clone", "-q", str(tree), str(workspace)], check=True)
    find, on_disk_text = timed(f"find {workspace} -path '*/.git' -prune -o -type f -print | wc -l")
    on_disk = int(on_disk_text)
    ls_files, _ = timed(f"git -C {workspace} ls-files -s | wc -l")
    tops = sorted(path.name for path in workspace.iterdir() if path.name.startswith("pkg"))
    doomed = tops[: max(1, len(tops) // 2)]
    _, deleted_text = timed(f"cd {workspace} && find {' '.join(doomed)} -type f | wc -l")
    deleted_count = int(deleted_text)
    database = state / "events.db"
    started = time.monotonic()
    daemon = start_watch(workspace, state)
    try:
        wait_for(
            lambda: (
                count(database, "SELECT COUNT(*) FROM psg_files") >= on_disk,
                count(database, "SELECT COUNT(*) FROM psg_files"),
            ),
            timeout,
        )
        learnt = count(database, "SELECT COUNT(*) FROM psg_files")
        baseline_s = time.monotonic() - started
        after_baseline = settled_rss(daemon.pid)  # the bar: what the daemon holds from now on
        graph_updates = count(database, "SELECT COUNT(*) FROM events WHERE kind = 'graph_update'")
        file_updates = stored(database)[1]
        with PeakRss(daemon.pid) as peak:
            wall = time.time()
            remove, _ = timed(f"cd {workspace} && rm -rf {' '.join(doomed)}")
            wait_for(
                lambda: (
                    stored(database, "deleted")[0] >= deleted_count,
                    stored(database, "deleted")[:2],
                ),
                timeout,
            )
            time.sleep(2.0)  # a late or extra event would land now
        recorded, events, latest = stored(database, "deleted")
        others = stored(database)[1] - events - file_updates
        alive = daemon.poll() is None
    finally:
        stop_watch(daemon)
    until_last = (latest - wall) if latest is not None else float("nan")
    ratio = peak.peak / after_baseline if after_baseline else float("nan")
    print("== delete: half of a repository that was there before the daemon started")
    print(f"files in the repository: {on_disk:,}; deleted by rm -rf: {deleted_count:,}")
    print(
        f"baseline: {learnt:,} files learnt in {baseline_s:.2f} s from the start of watch, "
        f"storing {graph_updates} graph_update and {file_updates} file_update "
        f"(target 1 and 0); peers, same run: git ls-files -s {ls_files:.3f} s, "
        f"find | wc -l {find:.3f} s"
    )
    print(
        f"deletions recorded / files deleted: {recorded:,} / {deleted_count:,} = "
        f"{100 * recorded / deleted_count:.2f} % (target 100 %); "
        f"stored more than once: {events - recorded} (target 0); "
        f"other file events: {others} (target 0)"
    )
    bench.figure(
        "rm -rf start -> last deletion stored", until_last, "s", peer=("rm -rf itself", remove)
    )
    bench.figure(
        "daemon peak RSS while deleting / RSS after the baseline "
        f"({peak.peak / 1024:.0f} / {after_baseline / 1024:.0f} MiB)",
        ratio,
        "x",
        target=f"< {RSS_TARGET}x",
        met=ratio < RSS_TARGET,
    )
    print(f"daemon alive at the end: {alive}")
    return (
        recorded == deleted_count
        and events == recorded
        and others == 0
        and graph_updates >= 1
        and file_updates == 0
        and (bench.quick or ratio < RSS_TARGET)
        and alive
    )


def main() -> int:
    bench = Bench(__doc__)
    bench.size("--files", full=100_000, quick=200, help="files in the tree")
    bench.parser.add_argument("--tree", type=Path, help="reuse (or create) the source tree here")
    bench.parser.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    bench.parser.add_argument(
        "--only", choices=["extract", "delete"], action="append", help="run only this part"
    )
    with bench.run() as args:
        chosen = args.only or ["extract", "delete"]
        ok = True
        with tempfile.TemporaryDirectory(prefix="mplp-burst-") as scratch:
            base = Path(scratch)
            tree = args.tree or base / "tree"
            make_tree(tree, args.files)
            if "extract" in chosen:
                ok = bench_extract(bench, base, tree, args.timeout) and ok
            if "delete" in chosen:
                ok = bench_delete(bench, base, tree, args.timeout) and ok
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

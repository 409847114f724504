"""The drift check itself: stat every recorded file, hash only those whose stat changed.

Runs on a worker thread. The recorded stat facts arrive as one in-memory dict (one bulk
read, no per-file queries), and the loop is a plain ``os.lstat`` per recorded path: on the
reference machine that was 1.9x faster than an ``os.scandir`` walk with ``DirEntry.stat``
over the same 100,000-file tree (it never lists directories, never walks into ignored trees
or symlink loops, and does only the one syscall per file). Threads are not used: on two
cores they made stat slower (see docs/drift.md).

Only files the PSG records are checked: a file the graph never knew is not drift.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mplp_lsp.drift.model import DiskFacts, Drift, Reason
from mplp_lsp.graph.content_hash import safe_hash
from mplp_lsp.graph.files import HASH_SIZE_CAP

Recorded = tuple[int | None, int | None, int | None]  # size, mtime_ns, inode
Index = dict[str, Recorded]
Progress = Callable[[int, int], None]  # (checked, total)

_EVERY = 4096  # paths between cancellation checks and progress reports
_IN_LIMIT = 500  # paths per "IN (...)" query
_GONE = (errno.ENOENT, errno.ENOTDIR)


def per_directory(files_in: Callable[[str], bool | Callable[[str], bool]]) -> Callable[[str], bool]:
    """An ``is_ignored(path)`` that looks a directory's rules up once per run of its files
    (see :meth:`~mplp_lsp.ignore.rules.IgnoreRules.files_in`): half the cost per path."""
    current: list[Any] = [None, False]  # directory, its verdict or judge

    def is_ignored(path: str) -> bool:
        directory, _, name = path.rpartition("/")
        if directory != current[0]:
            current[0], current[1] = directory, files_in(directory)
        judge = current[1]
        return judge if isinstance(judge, bool) else bool(judge(name))

    return is_ignored


def load_index(conn: sqlite3.Connection) -> Index:
    """Every node's recorded stat facts, in one query."""
    return {
        row[0]: (row[1], row[2], row[3])
        for row in conn.execute("SELECT path, size, mtime_ns, inode FROM psg_files")
    }


def recorded_rows(conn: sqlite3.Connection, paths: Sequence[str]) -> Index:
    """The recorded stat facts of these paths (those without a node are absent)."""
    out: Index = {}
    for start in range(0, len(paths), _IN_LIMIT):
        chunk = paths[start : start + _IN_LIMIT]
        marks = ",".join("?" * len(chunk))  # placeholders only: the values stay bound
        query = f"SELECT path, size, mtime_ns, inode FROM psg_files WHERE path IN ({marks})"  # noqa: S608
        for path, size, mtime_ns, inode in conn.execute(query, chunk):
            out[path] = (size, mtime_ns, inode)
    return out


def recorded_hashes(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, str | None]:
    """The recorded content hashes of these paths (those without a node are absent)."""
    out: dict[str, str | None] = {}
    for start in range(0, len(paths), _IN_LIMIT):
        chunk = paths[start : start + _IN_LIMIT]
        marks = ",".join("?" * len(chunk))  # placeholders only: the values stay bound
        query = f"SELECT path, content_hash FROM psg_files WHERE path IN ({marks})"  # noqa: S608
        out.update(conn.execute(query, chunk))
    return out


def recorded_under(conn: sqlite3.Connection, directory: str) -> list[str]:
    """Every recorded path below ``directory`` ("" for the whole workspace)."""
    if not directory:
        return [row[0] for row in conn.execute("SELECT path FROM psg_files")]
    # "0" follows "/" in code-point order: the range holds exactly the paths below
    query = "SELECT path FROM psg_files WHERE path >= ? AND path < ?"
    return [row[0] for row in conn.execute(query, (f"{directory}/", f"{directory}0"))]


def recorded_page(conn: sqlite3.Connection, *, directory: str, after: str, limit: int) -> list[str]:
    """Up to ``limit`` recorded paths below ``directory`` ("" for all) that sort after
    ``after``, in path order: the graph a page at a time, whatever its size."""
    if not directory:
        query = "SELECT path FROM psg_files WHERE path > ? ORDER BY path LIMIT ?"
        return [row[0] for row in conn.execute(query, (after, limit))]
    query = "SELECT path FROM psg_files WHERE path > ? AND path < ? ORDER BY path LIMIT ?"
    start = max(after, f"{directory}/")
    return [row[0] for row in conn.execute(query, (start, f"{directory}0", limit))]


def logged_not_applied(conn: sqlite3.Connection) -> dict[str, bool]:
    """Paths of the file events logged after the graph's last update (a crash between the
    log and the graph), each with whether the file exists after its last logged change."""
    query = (
        "SELECT json_extract(body, '$.payload.file_path'), "
        "json_extract(body, '$.payload.change_type'), "
        "json_extract(body, '$.payload.previous_path') FROM events "
        "WHERE kind = 'file_update' AND seq > "
        "(SELECT COALESCE(MAX(updated_seq), 0) FROM psg_files) ORDER BY seq"
    )
    out: dict[str, bool] = {}
    for path, change, previous in conn.execute(query):
        if previous:
            out[previous] = False
        out[path] = change != "deleted"
    return out


@dataclass
class ScanResult:
    checked: int = 0
    drifts: list[Drift] = field(default_factory=list)
    touched: list[tuple[str, DiskFacts]] = field(default_factory=list)  # same content, new stat
    ignored: list[str] = field(default_factory=list)
    missing_nodes: list[str] = field(default_factory=list)  # asked about, but not in the PSG
    cancelled: bool = False


def check(
    root: str,
    items: Sequence[tuple[str, Recorded]],
    conn: sqlite3.Connection,
    *,
    now: str,
    is_ignored: Callable[[str], bool] | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> ScanResult:
    outcome = ScanResult()
    changed: list[tuple[str, os.stat_result]] = []
    gone: list[tuple[str, Reason]] = []
    lstat = os.lstat
    prefix = root.rstrip("/") + "/"
    total = len(items)
    for index, (path, recorded) in enumerate(items):
        if not index % _EVERY:
            if cancel is not None and cancel.is_set():
                outcome.cancelled = True
                return outcome
            if progress is not None and index:
                progress(index, total)
        if is_ignored is not None and is_ignored(path):
            outcome.ignored.append(path)
            continue
        try:
            info = lstat(prefix + path)
        except OSError as error:
            # ELOOP (a symlink loop on the way), EACCES...: it cannot be what the PSG recorded
            gone.append((path, Reason.DELETED if error.errno in _GONE else Reason.UNREADABLE))
            continue
        if (info.st_size, info.st_mtime_ns, info.st_ino) != recorded:
            changed.append((path, info))
    outcome.checked = total
    _compare(root, changed, gone, conn, now, outcome)
    return outcome


def _compare(
    root: str,
    changed: list[tuple[str, os.stat_result]],
    gone: list[tuple[str, Reason]],
    conn: sqlite3.Connection,
    now: str,
    outcome: ScanResult,
) -> None:
    """Hash what changed and compare it with the recorded hash (few paths: per-path work)."""
    records = _records(conn, [path for path, _ in changed] + [path for path, _ in gone])
    for path, reason in gone:
        if path in records:
            outcome.drifts.append(Drift(path, reason, now, records[path][1]))
        else:
            outcome.missing_nodes.append(path)
    for path, info in changed:
        if path not in records:
            outcome.missing_nodes.append(path)
            continue
        recorded_hash, recorded_at = records[path]
        if not stat.S_ISREG(info.st_mode):
            outcome.drifts.append(Drift(path, Reason.NOT_A_FILE, now, recorded_at))
            continue
        digest = (
            safe_hash(f"{root}/{path}", like=recorded_hash)
            if info.st_size <= HASH_SIZE_CAP
            else None
        )
        if digest is None and info.st_size <= HASH_SIZE_CAP:
            disk = DiskFacts(info.st_size, info.st_mtime_ns, info.st_ino)
            outcome.drifts.append(Drift(path, Reason.UNREADABLE, now, recorded_at, disk))
            continue
        disk = DiskFacts(info.st_size, info.st_mtime_ns, info.st_ino, digest)
        if digest is not None and digest == recorded_hash:
            outcome.touched.append((path, disk))
        else:
            outcome.drifts.append(Drift(path, Reason.MODIFIED, now, recorded_at, disk))


def _records(conn: sqlite3.Connection, paths: list[str]) -> dict[str, tuple[str | None, str]]:
    out: dict[str, tuple[str | None, str]] = {}
    for start in range(0, len(paths), _IN_LIMIT):
        chunk = paths[start : start + _IN_LIMIT]
        marks = ",".join("?" * len(chunk))  # placeholders only: the values stay bound
        for path, digest, recorded_at in conn.execute(
            f"SELECT path, content_hash, last_modified FROM psg_files WHERE path IN ({marks})",  # noqa: S608
            chunk,
        ):
            out[path] = (digest, recorded_at)
    return out

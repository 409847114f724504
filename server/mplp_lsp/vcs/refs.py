"""Refs and reflogs read straight from the files, and the stat signature of an idle poll.

Reading ``packed-refs``, the loose refs and ``HEAD`` costs microseconds where a git process
costs milliseconds. A poll first compares a :class:`Signature` (one ``stat`` per refs
directory, ``packed-refs``, ``HEAD`` and its reflog) and reads the refs only when it moved.
Updating a loose ref renames a lock file over it, so its directory's mtime changes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ZERO = "0" * 40
HEAD = "HEAD"
WATCHED_NAMESPACES = ("refs/heads", "refs/tags", "refs/remotes")
# mtimes this close to the read may still change within the same clock tick: read again.
_RACY_NS = 2_000_000_000
_REFLOG_TAIL = 64 * 1024

Stamp = tuple[int, int, int]  # (mtime_ns, inode, size); (0, 0, -1) for a missing path


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every watched ref's object id, plus ``HEAD`` while it is detached."""

    refs: dict[str, str]
    head_target: str | None  # the branch HEAD points to; None when detached or unborn

    def tips(self) -> set[str]:
        return {value for name, value in self.refs.items() if name != HEAD}


@dataclass(frozen=True, slots=True)
class ReflogEntry:
    old: str
    new: str
    timestamp: int
    message: str


def _stamp(path: Path) -> Stamp:
    try:
        info = path.stat()
    except OSError:
        return (0, 0, -1)
    return (info.st_mtime_ns, info.st_ino, info.st_size)


class Signature:
    """What an idle poll looks at. ``changed()`` is a handful of ``stat`` calls."""

    def __init__(self, git_dir: Path, common_dir: Path) -> None:
        self._fixed = (git_dir / "HEAD", git_dir / "logs" / "HEAD", common_dir / "packed-refs")
        self._common = common_dir
        self._paths: tuple[Path, ...] = ()
        self._stamps: tuple[Stamp, ...] = ()
        self._racy = True

    def changed(self) -> bool:
        if self._racy:
            return True
        return tuple(_stamp(path) for path in self._paths) != self._stamps

    def invalidate(self) -> None:
        """Make the next ``changed()`` true: what was read since ``record()`` was dropped."""
        self._racy = True

    def record(self) -> None:
        """Take the stamps now; call just before reading the refs."""
        self._paths = self._fixed + tuple(_ref_dirs(self._common))
        now = time.time_ns()
        self._stamps = tuple(_stamp(path) for path in self._paths)
        self._racy = any(now - stamp[0] < _RACY_NS for stamp in self._stamps if stamp[2] >= 0)


def _ref_dirs(common_dir: Path) -> Iterator[Path]:
    for namespace in WATCHED_NAMESPACES:
        top = common_dir / namespace
        yield top
        for parent, dirs, _files in os.walk(top):
            for name in dirs:
                yield Path(parent) / name


def read_snapshot(git_dir: Path, common_dir: Path) -> Snapshot:
    refs = _packed_refs(common_dir / "packed-refs")
    for namespace in WATCHED_NAMESPACES:
        for name, value in _loose_refs(common_dir, namespace):
            refs[name] = value
    head = _read_text(git_dir / "HEAD").strip()
    target = None
    if head.startswith("ref: "):
        target = head[5:].strip()
    elif is_oid(head):
        refs[HEAD] = head
    return Snapshot(refs, target)


def _packed_refs(path: Path) -> dict[str, str]:
    refs: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        if not line or line[0] in "#^":
            continue  # header, or the peeled value of the tag above
        value, _, name = line.partition(" ")
        if is_oid(value) and name.startswith(WATCHED_NAMESPACES):
            refs[name] = value
    return refs


def _loose_refs(common_dir: Path, namespace: str) -> Iterator[tuple[str, str]]:
    top = common_dir / namespace
    for parent, _dirs, files in os.walk(top):
        for name in files:
            if name.endswith(".lock"):
                continue
            path = Path(parent) / name
            value = _read_text(path).strip()
            if is_oid(value):  # a symbolic ref (refs/remotes/origin/HEAD) is not a tip
                yield path.relative_to(common_dir).as_posix(), value


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def is_oid(value: str) -> bool:
    return len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value)


def reflog_path(info_git_dir: Path, common_dir: Path, ref: str) -> Path:
    return (info_git_dir if ref == HEAD else common_dir) / "logs" / ref


def reflog_entry(path: Path, new: str) -> ReflogEntry | None:
    """The newest entry of a reflog that moved the ref to ``new``."""
    return next((e for e in reversed(_tail_entries(path)) if e.new == new), None)


def reflog_newest(path: Path, message_prefix: str) -> ReflogEntry | None:
    """The newest entry whose message starts with ``message_prefix``, if the tail holds one."""
    return next(
        (e for e in reversed(_tail_entries(path)) if e.message.startswith(message_prefix)), None
    )


def reflog_creation(path: Path) -> ReflogEntry | None:
    """The entry that created the ref (old value zero), if the reflog tail still holds it."""
    entries = _tail_entries(path)
    return next((e for e in reversed(entries) if e.old == ZERO), None)


def _tail_entries(path: Path) -> list[ReflogEntry]:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _REFLOG_TAIL))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    parsed = (_parse_reflog_line(line) for line in tail.splitlines())
    return [entry for entry in parsed if entry is not None]


def _parse_reflog_line(line: str) -> ReflogEntry | None:
    head, _, message = line.partition("\t")
    parts = head.split(" ")
    if len(parts) < 4 or not (is_oid(parts[0]) and is_oid(parts[1])):
        return None
    try:
        timestamp = int(parts[-2])
    except ValueError:
        return None
    return ReflogEntry(parts[0], parts[1], timestamp, message)

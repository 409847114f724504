"""File-system watching for ``mplp-lsp watch``: hints of what changed, never the verdict.

What a watcher reports is a hint: the change it names may be out of order (a create and a
delete in one batch), stale (a file gone again) or missing (a queue overflow, files written
into a directory before its watch existed). So a watcher here only says *which paths to
look at*; the settled state of each path is taken from the disk when its debounce window
closes (:mod:`mplp_lsp.sources.disk_state`). Two more reports keep nothing from being lost:

* a new directory (created, or moved in) is watched and then scanned, and every file
  already in it is reported, so files written before its watch was added are not missed;
* a directory moved inside the tree (both halves of the move in one read, matched by the
  kernel's cookie) is one rename per file below it, each from its old path;
* when events may have been lost (an inotify queue overflow, a watcher error, a directory
  deleted or moved away), the watches are put back and :meth:`WatchSink.lost` names the
  directory the sink compares with the graph (a slice at a time: nothing is reported per
  file here).

When the watcher stops, the reports the kernel has queued are read first: a write seen
before the stop is reported, and the sink stores it before the process ends.

On Linux the kernel's inotify is used directly (through ``inotify_simple``), because it
reports queue overflows and hands names over as bytes; elsewhere ``watchfiles`` is used, and
an error from it (it stops on a name that is not UTF-8) restarts it after a full rescan.
Names that are not UTF-8 reach the sink as ``os.fsdecode`` strings (lone surrogates); the
path sanitiser refuses them with ``path_not_utf8`` and counts them. ``.git``, the
directories ``skip`` names, and the temporary names of :mod:`temp_names` are dropped here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import Protocol

from mplp_lsp.sanitize.redact import redact
from mplp_lsp.sources.debounce import Change
from mplp_lsp.sources.temp_names import is_temp_name

log = logging.getLogger(__name__)

SkipDir = Callable[[str], bool]
_PAUSE = 0.05  # seconds between looks at a saturated sink


class WatchSink(Protocol):
    def changed(self, change: Change, path: str, previous: str | None = None) -> None:
        """Something happened to ``path`` (absolute); the disk has the final say."""

    def lost(self, directory: str) -> None:
        """Changes under ``directory`` (absolute) may have gone unreported."""

    def saturated(self) -> bool:
        """The sink holds as much as it should: reading waits until it drains (the kernel
        queues what happens meanwhile; if its queue overflows, :meth:`lost` follows)."""


def files_under(
    top: str, skip: SkipDir, on_dir: Callable[[str], bool] | None = None
) -> Iterator[str]:
    """Every regular file below ``top`` (absolute paths), without following symlinks.

    ``skip`` prunes directories; ``on_dir`` is called for each directory before it is
    listed and prunes it when it returns False (the watcher adds its watch there, so a
    file created after the listing is reported by the watch, one created before by the
    listing).
    """
    stack = [top]
    while stack:
        directory = stack.pop()
        if on_dir is not None and not on_dir(directory):
            continue
        try:
            entries = os.scandir(directory)
        except OSError:
            continue  # gone again, or not readable: nothing to report from it
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not skip(entry.path):
                            stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False) and not is_temp_name(entry.name):
                        yield entry.path
                except OSError:
                    continue


def _name(path: str) -> str:
    return path.rpartition("/")[2]


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _skipper(
    root: str, skip: tuple[str, ...], ignored_dir: Callable[[str], bool] = lambda _rel: False
) -> SkipDir:
    prefixes = tuple(f"{path}/" for path in (f"{root}/.git", *skip))
    cut = len(root) + 1

    def skipped(path: str) -> bool:
        if f"{path}/".startswith(prefixes) or _name(path) == ".git":
            return True
        return ignored_dir(path[cut:])

    return skipped


async def watch_files(
    root: str,
    sink: WatchSink,
    stop: asyncio.Event,
    *,
    skip: tuple[str, ...] = (),
    ignored_dir: Callable[[str], bool] = lambda _rel: False,
    ready: Callable[[], None] = lambda: None,
) -> None:
    """Report changes under ``root`` to ``sink`` until ``stop`` is set; ``ready`` is called
    once every directory is watched (a change from then on is reported).

    ``skip`` (absolute) and the directories ``ignored_dir`` (given a root-relative path)
    judges ignored are neither watched nor listed: nothing in them becomes an event anyway,
    and a ``node_modules`` would use up the kernel's watches. The verdicts are asked again
    when a ``.gitignore`` changes, for the directory it governs.
    """
    skipped = _skipper(root, skip, ignored_dir)
    if sys.platform.startswith("linux"):
        watcher = _Inotify(root, sink, skipped)
        try:
            watcher.start(asyncio.get_running_loop())
            ready()
            await stop.wait()
        finally:
            watcher.close()
    else:
        await _watch_portable(root, sink, stop, skipped, ready)


# -- Linux: inotify ----------------------------------------------------------------------


def _flags() -> tuple[int, int, int, int, int, int, int, int, int, int]:
    from inotify_simple import flags

    return (
        flags.CREATE, flags.DELETE, flags.MOVED_FROM, flags.MOVED_TO, flags.ISDIR,
        flags.Q_OVERFLOW, flags.IGNORED, flags.DELETE_SELF,
        flags.CREATE | flags.DELETE | flags.MODIFY | flags.CLOSE_WRITE | flags.ATTRIB
        | flags.MOVED_FROM | flags.MOVED_TO | flags.DELETE_SELF,
        flags.ONLYDIR | flags.DONT_FOLLOW | flags.EXCL_UNLINK,
    )  # fmt: skip


class _Inotify:
    """One inotify instance watching every directory of the tree, read on the event loop."""

    def __init__(self, root: str, sink: WatchSink, skip: SkipDir) -> None:
        from inotify_simple import INotify

        (
            self._create, self._delete, self._moved_from, self._moved_to, self._isdir,
            self._overflow, self._ignored, self._delete_self, events, options,
        ) = _flags()  # fmt: skip
        self._mask = events | options
        self._root = root
        self._sink = sink
        self._skip = skip
        self._inotify = INotify(nonblocking=True)
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory
        self._wds: dict[str, int] = {}
        self._limit_logged = False
        self._paused: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._add_tree(self._root, report=False)
        loop.add_reader(self._inotify.fileno(), self._ready)
        self._loop = loop

    def close(self) -> None:
        loop = getattr(self, "_loop", None)
        if loop is not None:
            if self._paused is not None:
                self._paused.cancel()
            loop.remove_reader(self._inotify.fileno())
            self._read()  # what the kernel queued before the stop is reported, not dropped
        self._inotify.close()

    def _ready(self) -> None:
        """Reports are waiting: read them, unless the sink is full; then pause (the kernel
        holds them, and an overflow of its queue ends in a comparison, a slice at a time)."""
        if not self._sink.saturated():
            self._read()
            return
        self._loop.remove_reader(self._inotify.fileno())
        self._paused = self._loop.call_later(_PAUSE, self._resume)

    def _resume(self) -> None:
        self._paused = None
        if self._sink.saturated():
            self._paused = self._loop.call_later(_PAUSE, self._resume)
        else:
            self._loop.add_reader(self._inotify.fileno(), self._ready)

    def _watch(self, directory: str) -> bool:
        try:
            wd = self._inotify.add_watch(os.fsencode(directory), self._mask)
        except OSError as error:
            if error.errno == errno.ENOSPC and not self._limit_logged:
                self._limit_logged = True
                log.warning(
                    "inotify watch limit reached: directories beyond it are not watched "
                    "(raise fs.inotify.max_user_watches)"
                )
            elif error.errno not in (errno.ENOENT, errno.ENOTDIR):
                log.warning("cannot watch %r: %s", redact(directory), error.strerror)
            return False
        previous = self._dirs.get(wd)
        if previous is not None and previous != directory:
            self._wds.pop(previous, None)  # the same directory, moved
        self._dirs[wd] = directory
        self._wds[directory] = wd
        return True

    def _add_tree(self, top: str, *, report: bool) -> None:
        files = files_under(top, self._skip, on_dir=self._watch)
        if report:
            for path in files:
                self._sink.changed(Change.CREATED, path)
        else:
            for _ in files:
                pass

    def _unwatch_tree(self, top: str) -> None:
        prefix = f"{top}/"
        for directory in [d for d in self._wds if d == top or d.startswith(prefix)]:
            wd = self._wds.pop(directory)
            self._dirs.pop(wd, None)
            with contextlib.suppress(OSError):  # already gone with its directory
                self._inotify.rm_watch(wd)

    def _read(self) -> None:
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            log.exception("reading inotify events failed; rescanning the workspace")
            self._rescan(self._root)
            return
        hints: dict[str, Change] = {}
        moves: dict[int, str] = {}  # cookie -> source of a move not yet matched
        renames: list[tuple[str, str]] = []
        folders: dict[int, str] = {}  # cookie -> a directory moved away, not yet matched
        for wd, mask, cookie, name in events:
            if mask & self._overflow:
                log.warning("inotify queue overflow; rescanning the workspace")
                self._rescan(self._root)
                continue
            directory = self._dirs.get(wd)
            if directory is None:
                continue
            if mask & self._ignored:
                del self._dirs[wd]
                if self._wds.get(directory) == wd:
                    del self._wds[directory]
                continue
            if not name:
                if mask & self._delete_self and directory == self._root:
                    self._sink.lost(self._root)
                continue
            path = f"{directory}/{name}"
            if mask & self._isdir:
                self._directory_event(mask, cookie, path, folders)
            elif mask & self._moved_from:
                moves[cookie] = path
            elif mask & self._moved_to and cookie in moves:
                renames.append((moves.pop(cookie), path))
            elif mask & self._delete:
                hints[path] = Change.DELETED
            elif mask & (self._create | self._moved_to):
                hints.setdefault(path, Change.CREATED)
            else:
                hints.setdefault(path, Change.MODIFIED)
        for source in moves.values():  # moved out of the tree
            hints[source] = Change.DELETED
        for folder in folders.values():  # a directory moved out of the tree
            self._unwatch_tree(folder)
            self._sink.lost(folder)
        for source, target in renames:
            self._renamed(source, target)
        for path, change in hints.items():
            if not is_temp_name(_name(path)):
                self._sink.changed(change, path)
        for path in hints:
            if _name(path) == ".gitignore":  # a directory below may be ignored no more
                self._add_tree(path.rpartition("/")[0], report=False)

    def _directory_event(self, mask: int, cookie: int, path: str, folders: dict[int, str]) -> None:
        if mask & self._moved_from and not self._skip(path):
            folders[cookie] = path  # moved: where to, the rest of this read may say
        elif mask & self._moved_to and cookie in folders:
            self._directory_moved(folders.pop(cookie), path)
        elif self._skip(path):
            return
        elif mask & self._delete:
            self._unwatch_tree(path)
            self._sink.lost(path)
        elif mask & (self._create | self._moved_to):
            self._add_tree(path, report=True)

    def _directory_moved(self, source: str, target: str) -> None:
        """A directory moved inside the tree: each file below it was renamed."""
        self._unwatch_tree(source)
        if self._skip(target):  # moved into an ignored place: its files are gone from view
            self._sink.lost(source)
            return
        cut = len(target)
        for path in files_under(target, self._skip, on_dir=self._watch):
            self._sink.changed(Change.RENAMED, path, source + path[cut:])

    def _renamed(self, source: str, target: str) -> None:
        source_temp = is_temp_name(_name(source))
        target_temp = is_temp_name(_name(target))
        if source_temp and target_temp:
            return
        if source_temp:  # an atomic save landing on its file
            self._sink.changed(Change.MODIFIED, target)
        elif target_temp:  # a file moved aside (a backup copy): gone from its path
            self._sink.changed(Change.DELETED, source)
        else:
            self._sink.changed(Change.RENAMED, target, source)

    def _rescan(self, top: str) -> None:
        self._add_tree(top, report=False)  # watches first: what changes next is reported
        self._sink.lost(top)


# -- other platforms: watchfiles -----------------------------------------------------------


async def _watch_portable(
    root: str, sink: WatchSink, stop: asyncio.Event, skip: SkipDir, ready: Callable[[], None]
) -> None:
    from watchfiles import Change as FsChange
    from watchfiles import awatch

    changes = {
        FsChange.added: Change.CREATED,
        FsChange.modified: Change.MODIFIED,
        FsChange.deleted: Change.DELETED,
    }

    def wanted(_change: FsChange, path: str) -> bool:
        return not skip(path.rpartition("/")[0]) and not skip(path)

    ready()  # watchfiles adds its watches in the first step of the loop below
    while not stop.is_set():
        try:
            async for batch in awatch(
                root, watch_filter=wanted, debounce=50, step=20, stop_event=stop
            ):
                for change, path in batch:
                    if _is_dir(path):
                        for found in files_under(path, skip):
                            sink.changed(Change.CREATED, found)
                    elif not is_temp_name(_name(path)):
                        sink.changed(changes[change], path)
                    if change is FsChange.deleted:  # it may have been a directory
                        sink.lost(path)
            return
        except Exception:
            log.exception("the file watcher stopped; restarting it and rescanning the workspace")
            sink.lost(root)

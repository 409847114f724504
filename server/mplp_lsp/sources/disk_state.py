"""The settled change of a path, decided by what the disk holds when its window closes and
what the graph held when it opened.

Reports are hints: a watcher's arrive out of order, late, or not at all (see
:mod:`mplp_lsp.sources.fswatch`); an editor's say what it meant to do (a ``willSave`` may
be followed by no write at all). So every window's change is decided here from the window's
final state: one ``lstat`` of the path, and what the graph records for it (or what this
process sent and the graph has not applied yet). The graph knows every file from the first
start on (the baseline, :mod:`mplp_lsp.graph.baseline`), so "the graph has no node"
means "the path held no file when the window opened":

==========================  =====================  ========================================
on disk now                 recorded               change
==========================  =====================  ========================================
a regular file              nothing                ``created``
a regular file              a node                 ``modified``, unless nothing was written
nothing, or not a file      a node                 ``deleted``
nothing, or not a file      nothing                none
==========================  =====================  ========================================

"Nothing was written": the file has the stat facts (size, mtime, inode) recorded for it and
no editor reported a write in the window (an editor's ``didSave`` is its word that it wrote,
even when the graph already read the write under an earlier event). So a rewrite through a
temporary file and a rename (``sed -i``, ``rsync``, an atomic save) is ``modified`` however
it was reported, a file replaced by a symlink is ``deleted``, and a directory, FIFO, socket
or device never becomes a file event.

A rename is a claim about identity, so it is kept only with evidence that the file now at
the target is the one recorded at the source: the source is gone, the target is a regular
file, and it has the source's inode (a move the kernel or an editor reported) or, for a
delete and a create paired by guess (:data:`~mplp_lsp.sources.debounce.PAIRED`), the
source's inode, size and mtime together (an inode number is reused at once by the next new
file), or its recorded content. Otherwise its two paths are decided on their own.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from mplp_lsp.graph.content_hash import safe_hash
from mplp_lsp.graph.files import FileChange
from mplp_lsp.sources.debounce import PAIRED, Change, Settled
from mplp_lsp.sources.recorded import Stat

WROTE = "wrote"  # Observation.extra key: an editor reported a write of this path

Facts = tuple[int | None, int | None, int | None]  # size, mtime_ns, inode, as psg_files has them


class DiskState:
    def __init__(self, root: str) -> None:
        self._prefix = root.rstrip("/") + "/"
        # Emitted by this process and not yet applied by the PSG (it applies after the
        # intake is quiet): None for a deletion. Counted per emitted event.
        self._emitted: dict[str, Facts | None] = {}
        self._in_flight: Counter[str] = Counter()
        self._reads = 0  # recorded facts read and not yet settled
        self._deferred: list[FileChange] = []
        self.unchanged = 0  # windows that changed nothing once the disk was asked
        self._looked: Mapping[str, Stat | None] = {}  # the disk as settle's batch found it
        # Paths gone that were never a file here: a report of a deleted directory, maybe
        # (an editor's watcher names a deleted folder alone). Taken by whoever looks below.
        self.gone_unknown: list[str] = []

    @staticmethod
    def paths(batch: Iterable[Settled]) -> list[str]:
        """The paths whose recorded facts :meth:`settle` needs."""
        out: set[str] = set()
        for settled in batch:
            out.add(settled.path)
            if settled.previous_path is not None:
                out.add(settled.previous_path)
        return sorted(out)

    @staticmethod
    def renamed_from(batch: Iterable[Settled]) -> list[str]:
        """The sources of renames: their recorded content may be the evidence."""
        return sorted({s.previous_path for s in batch if s.previous_path is not None})

    def look(self, paths: Iterable[str]) -> dict[str, Stat | None]:
        """What the disk holds at each path now (None: nothing, or not a regular file): one
        ``lstat`` per path, taken off the event loop with the recorded facts and shared by
        :meth:`settle` and the screening of recorded content."""
        return {path: _facts_at(self._prefix + path) for path in paths}

    def pending_under(self, directory: str) -> list[str]:
        """Emitted paths below ``directory`` ("" for all) the graph may not have yet."""
        prefix = f"{directory}/" if directory else ""
        return [path for path in self._emitted if path.startswith(prefix)]

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Around reading the recorded facts for :meth:`settle` and settling: what the graph
        applies meanwhile is forgotten here only after, or the facts read before it applied
        would be taken for the graph's word on what this process sent."""
        self._reads += 1
        try:
            yield
        finally:
            self._reads -= 1
            if not self._reads and self._deferred:
                deferred, self._deferred = self._deferred, []
                self.applied(deferred)

    def settle(
        self,
        batch: Sequence[Settled],
        recorded: Mapping[str, Facts],
        hashes: Mapping[str, str | None] | None = None,
        disk: Mapping[str, Stat | None] | None = None,
    ) -> list[Settled]:
        """The batch with each window's change decided by the disk and the graph;
        ``hashes``: recorded content hashes of rename sources; ``disk``: what :meth:`look`
        found for the batch's paths (the disk is asked for any other)."""
        out: list[Settled] = []
        self._looked = disk or {}
        try:
            for settled in batch:
                decided = self._decide(settled, recorded, hashes or {})
                if not decided:
                    self.unchanged += 1
                out.extend(decided)
        finally:
            self._looked = {}
        return out

    def applied(self, changes: Sequence[FileChange]) -> None:
        """The PSG applied these changes: the graph now answers for their paths."""
        if self._reads:
            self._deferred.extend(changes)
            return
        for change in changes:
            for path in (change.path, change.previous_path):
                if path is not None and path in self._in_flight:
                    self._in_flight[path] -= 1
                    if self._in_flight[path] <= 0:
                        del self._in_flight[path]
                        self._emitted.pop(path, None)

    # -- internals -------------------------------------------------------------------------

    def _decide(
        self, settled: Settled, recorded: Mapping[str, Facts], hashes: Mapping[str, str | None]
    ) -> list[Settled]:
        target = self._on_disk(settled.path)
        wrote = WROTE in settled.extra
        source = settled.previous_path
        if source is not None:
            if (
                target is not None
                and self._on_disk(source) is None
                and self._same_file(settled, source, target, recorded, hashes)
            ):
                self._emit(source, None)
                self._emit(settled.path, target)
                return [settled]
            gone = self._change(source, self._on_disk(source), recorded, wrote=False)
            out = [] if gone is None else [self._as(settled, source, gone)]
            change = self._change(settled.path, target, recorded, wrote=wrote)
            return out + ([] if change is None else [self._as(settled, settled.path, change)])
        change = self._change(settled.path, target, recorded, wrote=wrote)
        return [] if change is None else [self._as(settled, settled.path, change)]

    def _same_file(
        self,
        settled: Settled,
        source: str,
        target: Facts,
        recorded: Mapping[str, Facts],
        hashes: Mapping[str, str | None],
    ) -> bool:
        """Whether the file at the target is the one recorded at the source."""
        if not self._known(source, recorded):
            return False
        was = self._facts(source, recorded)
        if was is not None and was[2] is not None:
            if PAIRED not in settled.extra and was[2] == target[2]:
                return True  # the kernel's or the editor's move: one inode, one file
            if was == target:
                return True
        digest = hashes.get(source)
        return digest is not None and safe_hash(self._prefix + settled.path, like=digest) == digest

    def _as(self, settled: Settled, path: str, change: Change) -> Settled:
        # Made directly: dataclasses.replace costs several times more, once per path.
        s = settled
        return Settled(path, change, None, s.first_at, s.last_at, s.count, s.extra)

    def _change(
        self, path: str, disk: Facts | None, recorded: Mapping[str, Facts], *, wrote: bool
    ) -> Change | None:
        if disk is None:
            if not self._known(path, recorded):
                if path not in self._emitted:
                    self.gone_unknown.append(path)
                return None
            self._emit(path, None)
            return Change.DELETED
        if not self._known(path, recorded):
            change = Change.CREATED
        elif not wrote and self._facts(path, recorded) == disk:
            return None
        else:
            change = Change.MODIFIED
        self._emit(path, disk)
        return change

    def _known(self, path: str, recorded: Mapping[str, Facts]) -> bool:
        if path in self._emitted:
            return self._emitted[path] is not None
        return path in recorded

    def _facts(self, path: str, recorded: Mapping[str, Facts]) -> Facts | None:
        if path in self._emitted:
            return self._emitted[path]
        return recorded.get(path)

    def _emit(self, path: str, facts: Facts | None) -> None:
        self._emitted[path] = facts
        self._in_flight[path] += 1

    def _on_disk(self, path: str) -> Facts | None:
        if path in self._looked:
            return self._looked[path]
        return _facts_at(self._prefix + path)


def _facts_at(path: str) -> Stat | None:
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ino)

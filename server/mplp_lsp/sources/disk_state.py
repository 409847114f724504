"""The settled change of a watched path, taken from the disk when its window closes.

A watcher's report says which path to look at, not what happened to it: reports arrive
out of order, late, or not at all (see :mod:`mplp_lsp.sources.fswatch`). When a window
that a watcher took part in settles, its change is decided here from two facts only: what
the disk holds now (one ``lstat``) and what the graph records (or what this process emitted
and the graph has not applied yet):

==========================  =======================  =======================================
on disk now                 recorded                 change
==========================  =======================  =======================================
a regular file              nothing                  ``created`` (``modified`` if reported)
a regular file              other size/mtime/inode   ``modified``
a regular file              the same stat facts      none
nothing, or not a file      a node                   ``deleted``
nothing, or not a file      nothing                  none
==========================  =======================  =======================================

A rename keeps its link when its source is gone from the disk and its target is a file;
otherwise its two paths are decided on their own. So ``echo x > t; rm t`` in one batch
gives nothing, a directory, FIFO, socket or device never becomes a file event, and a scan
that reports files the graph already has (a new directory's listing, an overflow rescan)
adds nothing for them. Windows only an editor reported are taken at their word.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from mplp_lsp.runtime.psg.files import FileChange
from mplp_lsp.sources.debounce import Change, Settled

WATCHED = "watched"  # Observation.extra key: a watcher (or a scan) reported this path

Facts = tuple[int | None, int | None, int | None]  # size, mtime_ns, inode, as psg_files has them


class DiskState:
    def __init__(self, root: str) -> None:
        self._prefix = root.rstrip("/") + "/"
        # Emitted by this process and not yet applied by the PSG (it applies after the
        # intake is quiet): None for a deletion. Counted per emitted event.
        self._emitted: dict[str, Facts | None] = {}
        self._in_flight: Counter[str] = Counter()
        self.unchanged = 0  # watched windows that changed nothing once the disk was asked

    @staticmethod
    def watched(batch: Sequence[Settled]) -> bool:
        return any(WATCHED in settled.extra for settled in batch)

    @staticmethod
    def paths(batch: Iterable[Settled]) -> list[str]:
        """The paths whose recorded facts :meth:`settle` needs."""
        out: set[str] = set()
        for settled in batch:
            if WATCHED in settled.extra:
                out.add(settled.path)
                if settled.previous_path is not None:
                    out.add(settled.previous_path)
        return sorted(out)

    def pending_under(self, directory: str) -> list[str]:
        """Emitted paths below ``directory`` ("" for all) the graph may not have yet."""
        prefix = f"{directory}/" if directory else ""
        return [path for path in self._emitted if path.startswith(prefix)]

    def settle(self, batch: Sequence[Settled], recorded: Mapping[str, Facts]) -> list[Settled]:
        """The batch with each watched window's change decided by the disk."""
        out: list[Settled] = []
        for settled in batch:
            if WATCHED not in settled.extra:
                out.append(settled)
                continue
            decided = self._decide(settled, recorded)
            if not decided:
                self.unchanged += 1
            out.extend(decided)
        return out

    def applied(self, changes: Sequence[FileChange]) -> None:
        """The PSG applied these changes: the graph now answers for their paths."""
        for change in changes:
            for path in (change.path, change.previous_path):
                if path is not None and path in self._in_flight:
                    self._in_flight[path] -= 1
                    if self._in_flight[path] <= 0:
                        del self._in_flight[path]
                        self._emitted.pop(path, None)

    # -- internals -------------------------------------------------------------------------

    def _decide(self, settled: Settled, recorded: Mapping[str, Facts]) -> list[Settled]:
        target = self._on_disk(settled.path)
        source = settled.previous_path
        if source is not None:
            if target is not None and self._on_disk(source) is None:
                self._emit(source, None)
                self._emit(settled.path, target)
                return [settled]
            gone = self._change(source, self._on_disk(source), recorded, Change.DELETED)
            out = [] if gone is None else [self._as(settled, source, gone)]
            change = self._change(settled.path, target, recorded, Change.CREATED)
            return out + ([] if change is None else [self._as(settled, settled.path, change)])
        change = self._change(settled.path, target, recorded, settled.change)
        return [] if change is None else [self._as(settled, settled.path, change)]

    def _as(self, settled: Settled, path: str, change: Change) -> Settled:
        return replace(settled, path=path, change=change, previous_path=None)

    def _change(
        self, path: str, disk: Facts | None, recorded: Mapping[str, Facts], reported: Change
    ) -> Change | None:
        if disk is None:
            if not self._known(path, recorded):
                return None
            self._emit(path, None)
            return Change.DELETED
        if not self._known(path, recorded):
            # A file the graph never recorded: "modified" when that is what was reported
            # (an editor's save of a file that predates recording), else "created".
            change: Change | None = (
                Change.MODIFIED if reported is Change.MODIFIED else Change.CREATED
            )
        elif self._facts(path, recorded) == disk:
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
        try:
            info = os.lstat(self._prefix + path)
        except (OSError, ValueError):
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return (info.st_size, info.st_mtime_ns, info.st_ino)

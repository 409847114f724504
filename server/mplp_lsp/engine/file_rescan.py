"""Comparing the disk with the graph where reports may have been lost, a slice at a time.

A watcher loses reports: the kernel's queue overflows (a mass deletion, 50,000 files in one
folder), a watched directory is deleted or moved away, the watcher itself fails. Then the
directory concerned is compared with the graph in two passes, each a slice of
:data:`~mplp_lsp.sources.tree.SLICE` paths at a time:

1. the graph's paths below it, a page at a time in path order, keep those that are no longer
   regular files (gone, or replaced by a link or a directory);
2. the disk's files below it, listed a slice at a time.

Each slice is decided at once by the disk and the graph, like a window that closed
(:mod:`mplp_lsp.sources.disk_state`: an untouched file gives nothing, a vanished one is
``deleted``, an unknown one ``created``), and stored before the next slice is read. So memory
grows with the slice, not with the tree, and the first changes are stored within a slice's
time, not after the whole tree was looked at. Paths with activity of their own in the
debouncer are left to it. Requests queue: one directory at a time, and a directory whose
parent is already queued is covered by it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from functools import partial

from mplp_lsp.drift.scan import recorded_page
from mplp_lsp.ignore.rules import IgnoreRules
from mplp_lsp.sources.tree import SLICE, recordable_files, slices
from mplp_lsp.store.writer import StoreWriter

log = logging.getLogger(__name__)

Decide = Callable[[list[str]], Awaitable[None]]


class Rescans:
    def __init__(
        self,
        root: str,
        writer: StoreWriter,
        decide: Decide,
        rules: Callable[[], IgnoreRules],
        *,
        pending_under: Callable[[str], list[str]] = lambda _directory: [],
    ) -> None:
        """``decide`` settles a slice of root-relative paths now; ``rules`` gives a fresh
        rule set for the listing thread; ``pending_under`` names paths sent to the graph
        and not applied yet (the graph cannot list them)."""
        self._root = root
        self._writer = writer
        self._decide = decide
        self._rules = rules
        self._pending_under = pending_under
        self._queue: list[str] = []
        self._task: asyncio.Task[None] | None = None

    def request(self, directory: str) -> None:
        """Compare ``directory`` ("" for the whole workspace) with the graph."""
        self._queue = enqueue(self._queue, directory)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="mplp-rescan")

    async def idle(self) -> None:
        """Wait until every requested comparison is stored."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _run(self) -> None:
        while self._queue:
            directory = self._queue.pop(0)
            try:
                await self._vanished(directory)
                await self._present(directory)
            except Exception:
                log.exception("comparing %r with the graph failed", directory or "the workspace")

    async def _vanished(self, directory: str) -> None:
        """Pass 1: recorded paths below ``directory`` that are no longer regular files."""
        missing = await asyncio.to_thread(_not_files, self._root, self._pending_under(directory))
        if missing:
            await self._decide(missing)
        after = ""
        while page := await self._writer.read(
            partial(recorded_page, directory=directory, after=after, limit=SLICE)
        ):
            after = page[-1]
            missing = await asyncio.to_thread(_not_files, self._root, page)
            if missing:
                await self._decide(missing)

    async def _present(self, directory: str) -> None:
        """Pass 2: the files below ``directory``, a slice at a time."""
        walk = slices(recordable_files(self._root, self._rules(), directory), SLICE)
        while chunk := await asyncio.to_thread(next, walk, None):
            await self._decide(chunk)


def enqueue(queue: list[str], directory: str) -> list[str]:
    """The queue with ``directory`` in it: nothing added when a queued directory covers it,
    and the queued ones it covers taken out (one comparison of the parent does them)."""
    if _covered(set(queue), directory):
        return queue
    return [queued for queued in queue if not _covers(directory, queued)] + [directory]


def _covered(queued: set[str], directory: str) -> bool:
    """Whether a queued directory is ``directory`` or one of its parents."""
    if "" in queued:
        return True
    parts = directory.split("/")
    return any("/".join(parts[:depth]) in queued for depth in range(1, len(parts) + 1))


def _covers(directory: str, other: str) -> bool:
    return not directory or other == directory or other.startswith(f"{directory}/")


def _not_files(root: str, paths: list[str]) -> list[str]:
    out = []
    for path in paths:
        try:
            regular = stat.S_ISREG(os.lstat(f"{root}/{path}").st_mode)
        except OSError:
            regular = False
        if not regular:
            out.append(path)
    return out


__all__ = ["Rescans", "enqueue"]

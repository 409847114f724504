"""The start-up catch-up of one workspace's files: what the graph must know before the live
sources' reports can be judged, and what changed while nothing recorded.

One walk of the tree finds every recordable file the graph has no node for, and its ``ctime``
(which extractors and checkouts cannot set back) says which it is:

* **there before recording began** (changed no later than the previous start began
  recording; on the first start, no later than the moment this process could first hear of
  the folder: the process's start, :mod:`mplp_lsp.process.start`, or when a folder added
  later was named to it): a node of the **baseline** (:mod:`mplp_lsp.graph.baseline`),
  learnt silently. A tracked file whose content is still the index's takes its stat facts
  from ``lstat`` and its content hash from the index (:mod:`mplp_lsp.vcs.index`: nothing is
  read); any other file is read and hashed. On the first start this is every file of the
  workspace that nothing changed since;
* **changed while nothing recorded** (from then up to this catch-up's cut): an event the
  caller decides against the disk like a watcher's report. On the first start a file that
  was there before (tracked, or born before: :mod:`~mplp_lsp.sources.birth_time`) is first
  learnt without stat facts (a tracked one with the content its index entry names), so that
  a save made while the server started is a ``modified``; a file born since is ``created``;
* **changed after the cut**: the live sources report it; on the first start a file that was
  there before is learnt the same way, so that the report is a ``modified`` too.

The graph equals the log first: events logged and not applied yet count as recorded.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from mplp_lsp.drift.scan import logged_not_applied, recorded_under
from mplp_lsp.engine.intake import Submission
from mplp_lsp.graph import baseline
from mplp_lsp.graph.baseline import BaselineNode, Tally
from mplp_lsp.graph.content_hash import git_blob
from mplp_lsp.graph.files import file_facts
from mplp_lsp.graph.graph_events import graph_id
from mplp_lsp.ignore.rules import IgnoreRules
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sources.birth_time import birth_ns
from mplp_lsp.sources.tree import recordable_files, slices
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.vcs.index import IndexBlobs, index_blobs

log = logging.getLogger(__name__)

# meta keys: when the latest start began recording (ns since the epoch), for the next
# catch-up; when the baseline was taken (its absence: a store that has none yet)
RECORDING_SINCE = "files_recording_since_ns"
BASELINE_AT = "files_baseline_at"


@dataclass
class Found:
    """One slice of the walk: nodes to learn, paths changed while nothing recorded."""

    nodes: list[BaselineNode] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    learnt: int
    changed: list[str]  # to decide against the disk and the graph, like reports
    first: bool  # no baseline before this one


class CatchUp:
    def __init__(
        self,
        root: Path,
        writer: StoreWriter,
        submit: Callable[[list[Submission]], Awaitable[Any]],
        rules: Callable[[], IgnoreRules],
        *,
        snapshot_cap: Callable[[], int],
        on_learnt: Callable[[], None] = lambda: None,
    ) -> None:
        """``submit`` stores the baseline's ``graph_update`` (the intake's ``submit_many``);
        ``rules``: a fresh ignore rule set for the walking thread; ``on_learnt`` is told when
        the graph learnt nodes (whoever keeps a copy of the graph's facts reloads it)."""
        self._root = str(root)
        self._writer = writer
        self._submit = submit
        self._rules = rules
        self._snapshot_cap = snapshot_cap
        self._on_learnt = on_learnt

    async def run(self, opened_ns: int, heard_ns: int, until_ns: int) -> Outcome:
        """Learn the baseline and list the files changed while nothing recorded (the caller
        decides those); ``heard_ns``: since when this process could hear of the folder's
        changes (a first start's baseline is cut there); files changed after ``until_ns``
        are the live sources'."""
        since, baseline_at, known = await self._writer.read(_recorded)
        first = baseline_at is None
        before = min(heard_ns, until_ns) if since is None else int(since)
        classify = _Classifier(self._root, known, before, until_ns, first, self._snapshot_cap())
        walk = slices(recordable_files(self._root, self._rules()))
        tally = Tally()
        changed: list[str] = []
        while found := await asyncio.to_thread(_next, walk, classify):
            changed.extend(found.changed)
            if found.nodes:
                added = await self._writer.run(partial(baseline.learn, nodes=found.nodes))
                tally.add(found.nodes, added)
        if tally.count:
            self._on_learnt()
            event = tally.event(await self._writer.run(graph_id))
            await self._submit([Submission(Kind.GRAPH_UPDATE, event, "psg")])
        stamp = str(opened_ns)
        cut = _stamp(before)
        try:
            await self._writer.run(lambda conn: _mark(conn, stamp, cut, first))
        except sqlite3.Error as error:  # a full disk, say: the next start looks further back
            log.warning("could not note when this catch-up started (%s)", error)
        if tally.count:
            log.info("%s: the graph learnt %d file(s) already there", self._root, tally.count)
        return Outcome(tally.count, changed, first)


def _recorded(conn: sqlite3.Connection) -> tuple[str | None, str | None, set[str]]:
    known = set(recorded_under(conn, ""))
    for path, alive in logged_not_applied(conn).items():
        if alive:
            known.add(path)
        else:
            known.discard(path)
    meta = EventLog(conn)
    return meta.get_meta(RECORDING_SINCE), meta.get_meta(BASELINE_AT), known


def _mark(conn: sqlite3.Connection, since: str, cut: str, first: bool) -> None:
    meta = EventLog(conn)
    meta.set_meta(RECORDING_SINCE, since)
    if first:
        meta.set_meta(BASELINE_AT, cut)


def _next(walk: Iterator[list[str]], classify: _Classifier) -> Found | None:
    """Pull and classify one slice of the walk (on the worker thread)."""
    chunk = next(walk, None)
    return None if chunk is None else classify(chunk)


@lru_cache(maxsize=64)
def _second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def _stamp(ns: int) -> str:
    """ISO 8601 UTC with milliseconds for a time in ns (files share their seconds: the
    formatting is done once per second)."""
    second, rest = divmod(ns, 1_000_000_000)
    return f"{_second(second)}.{rest // 1_000_000:03d}Z"


class _Classifier:
    def __init__(
        self, root: str, known: set[str], before: int, until: int, first: bool, cap: int
    ) -> None:
        self._root = root
        self._known = known
        self._before = before  # changed no later than this: there before recording began
        self._until = until
        self._first = first
        self._cap = cap
        self._cut = _stamp(before)
        self._index: IndexBlobs | None = None

    def index(self) -> IndexBlobs:
        """The index's blob ids, read when the first file to learn is met."""
        if self._index is None:
            self._index = index_blobs(Path(self._root))
        return self._index

    def __call__(self, paths: list[str]) -> Found:
        found = Found()
        for path in paths:
            if path in self._known:
                continue
            try:
                info = os.lstat(f"{self._root}/{path}")
            except OSError:
                continue  # gone again: nothing to learn or report
            if not stat.S_ISREG(info.st_mode):
                continue
            if info.st_ctime_ns <= self._before:
                node = self._node(path, info)
                if node is not None:
                    found.nodes.append(node)
                continue
            if self._first and (node := self._changed_since(path)) is not None:
                found.nodes.append(node)
            if info.st_ctime_ns <= self._until:
                found.changed.append(path)
        return found

    def _changed_since(self, path: str) -> BaselineNode | None:
        """A file changed after the baseline's cut, learnt as it was at the cut if a file was
        there then: a tracked one as its index entry's content, another one born before the
        cut with no facts at all (its change is then a ``modified``, not a ``created``). A
        rewrite through a temporary file and a rename gives the path a new inode, born after
        the cut: for a tracked path, the index says a file was there."""
        oid = self.index().staged.get(path)
        if oid is not None:
            return BaselineNode(path, self._cut, None, None, None, git_blob(oid))
        born = birth_ns(f"{self._root}/{path}")
        if born is not None and born <= self._before:
            return BaselineNode(path, self._cut, None, None, None, None)
        return None  # born after the cut, or no birth time: it is decided as created

    def _node(self, path: str, info: os.stat_result) -> BaselineNode | None:
        stamp = _stamp(min(info.st_mtime_ns, self._before))
        oid = self.index().clean(path)
        if oid is not None:
            return BaselineNode(
                path, stamp, info.st_size, info.st_mtime_ns, info.st_ino, git_blob(oid)
            )
        facts = file_facts(Path(self._root, path), snapshot_cap=self._cap)
        if facts is None:
            return None
        return BaselineNode(
            path, stamp, facts.size, facts.mtime_ns, facts.inode, facts.content_hash, facts.content
        )

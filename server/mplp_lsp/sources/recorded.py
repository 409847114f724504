"""What the store already records, so that an echo of it is not recorded again.

One save reaches the daemon more than once: Neovim without ``inotifywait`` sends ``didSave``
at once and a watched-file change about 600 ms later, after the first event was sent; a quick
fix that writes a file ("PSG wins", "three-way merge") comes back through the editor's
watcher and through ``mplp-lsp watch``; a second editor on the workspace sees the first one's
saves. None of these is a user edit.

A created or modified path is *already recorded* when the file now is:

* the same write as the last event this process sent for the path (size, modification time
  and inode unchanged); for a path it has sent nothing for since it started (or since the
  daemon wrote it), the write or the content (hash) the project graph holds. The graph alone
  is not enough: it reads the file when it applies an event, so after two quick saves it may
  already hold the second one's content under the first event, and the second save would be
  lost;
* the content the daemon itself last wrote to the path (a quick fix), until another write is
  seen there. A conflicted merge is written but not recorded, so without this its echo would
  make the graph take the conflict markers and the finding would vanish.

Every other write is an event, a revert to earlier content (A, then B, then A) included.
Comparing costs a ``stat`` per path; the content is hashed only when the size matches a
reference that carries a hash but the stat does not (the echo of the daemon's own write, a
graph node after a restart), so a burst of 20,000 new files is not read twice.

The daemon's writes go through a scratch file next to the target (``.mplp-restore-*``), which
watchers report too; such names never become events (:func:`scratch_name`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mplp_lsp.graph.content_hash import safe_hash
from mplp_lsp.graph.files import HASH_SIZE_CAP, bytes_hash

SCRATCH_PREFIX: Final = ".mplp-restore-"
_SENT_LIMIT: Final = 16_384  # paths remembered; older ones fall back on the graph
_QUERY_CHUNK: Final = 500

Stat = tuple[int, int, int]  # size, mtime_ns, inode of a regular file


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What identifies a file's content: its stat facts, its hash when known."""

    size: int
    mtime_ns: int | None = None
    inode: int | None = None
    digest: str | None = None

    def same_write(self, other: Fingerprint) -> bool:
        return (self.size, self.mtime_ns, self.inode) == (other.size, other.mtime_ns, other.inode)


GraphLookup = Callable[[Sequence[str]], Awaitable[dict[str, Fingerprint]]]


def scratch_name(path: str) -> bool:
    """Whether a workspace-relative path is one of the daemon's own scratch files."""
    return path.rsplit("/", 1)[-1].startswith(SCRATCH_PREFIX)


class RecordedContent:
    """Decides which created/modified paths carry content that is already recorded.

    ``graph`` reads the graph's fingerprints for paths; without one (a process that does not
    own the store) only what this process sent and wrote is known.
    """

    def __init__(
        self, root: Path, *, graph: GraphLookup | None = None, executor: Executor | None = None
    ) -> None:
        self._root = root
        self._graph = graph
        self._executor = executor
        self._sent: OrderedDict[str, Fingerprint] = OrderedDict()
        self._own: dict[str, Fingerprint] = {}
        # One screening at a time: two reports of one write screened at once (a second
        # editor's save handed over while the watcher's report of it is screened) would each
        # compare with the reference from before the write, and both become events.
        self._screening = asyncio.Lock()

    def wrote(self, path: str, content: bytes) -> None:
        """The daemon is about to write ``content`` to ``path``: its echo is not an edit.

        The graph is the reference for the path again (the write recorded it, or, for a
        conflicted merge, deliberately did not)."""
        self._own[path] = Fingerprint(len(content), digest=bytes_hash(content))
        self._sent.pop(path, None)

    def forget(self, paths: Iterable[str]) -> None:
        """Deleted or moved paths: content that appears there next is new, whatever it is."""
        for path in paths:
            self._sent.pop(path, None)
            self._own.pop(path, None)

    def _known(self, path: str, graph: Mapping[str, Fingerprint]) -> list[Fingerprint]:
        last = self._sent.get(path) or graph.get(path)
        return [fingerprint for fingerprint in (last, self._own.get(path)) if fingerprint]

    async def screen(
        self,
        paths: Sequence[str],
        disk: Mapping[str, Stat | None] | None = None,
        graph: Mapping[str, Fingerprint] | None = None,
    ) -> set[str]:
        """Of these created/modified paths, the ones whose content is already recorded.

        The others are remembered as sent. ``disk``: what the disk held at (some of) the
        paths, as (size, mtime_ns, inode) or None, just looked up (:meth:`DiskState.look`);
        those are compared without asking the disk again, unless their content must be read.
        ``graph``: the graph's fingerprints of every one of ``paths``, read with them
        (:func:`graph_fingerprints`); without it they are read here.
        """
        if not paths:
            return set()
        async with self._screening:
            return await self._screen(paths, disk, graph)

    async def _screen(
        self,
        paths: Sequence[str],
        disk: Mapping[str, Stat | None] | None,
        graph: Mapping[str, Fingerprint] | None,
    ) -> set[str]:
        if graph is None:
            unsent = [path for path in paths if path not in self._sent]
            graph = await self._graph(unsent) if self._graph is not None and unsent else {}
        known = {path: self._known(path, graph) for path in paths}
        looked = disk or {}
        verdicts: dict[str, tuple[bool, Fingerprint | None]] = {}
        unsettled: dict[str, list[Fingerprint]] = {}
        for path, references in known.items():
            verdict = _by_stat(references, looked[path]) if path in looked else None
            if verdict is None:
                unsettled[path] = references
            else:
                verdicts[path] = verdict
        if unsettled:
            loop = asyncio.get_running_loop()
            verdicts.update(
                await loop.run_in_executor(self._executor, _compare, self._root, unsettled)
            )
        recorded = set()
        for path in paths:
            echo, current = verdicts[path]
            if echo:
                recorded.add(path)
                continue
            self._own.pop(path, None)  # different content was seen: the user's now
            if current is not None:
                self._sent[path] = current
                self._sent.move_to_end(path)
            else:
                self._sent.pop(path, None)  # gone: nothing to compare with
        while len(self._sent) > _SENT_LIMIT:
            self._sent.popitem(last=False)
        return recorded


def _compare(
    root: Path, known: dict[str, list[Fingerprint]]
) -> dict[str, tuple[bool, Fingerprint | None]]:
    """For each path: is it one of its known fingerprints, and its fingerprint now."""
    out: dict[str, tuple[bool, Fingerprint | None]] = {}
    for path, references in known.items():
        try:
            info = (root / path).stat(follow_symlinks=False)
        except OSError:
            out[path] = (False, None)
            continue
        facts = (
            (info.st_size, info.st_mtime_ns, info.st_ino) if stat.S_ISREG(info.st_mode) else None
        )
        verdict = _by_stat(references, facts)
        if verdict is not None:
            out[path] = verdict
            continue
        assert facts is not None  # only a regular file's content is read
        now = Fingerprint(*facts)
        hashed = {r.digest for r in references if r.size == now.size and r.digest is not None}
        digests = {safe_hash(str(root / path), like=digest) for digest in hashed}
        match = hashed & digests
        now = Fingerprint(now.size, now.mtime_ns, now.inode, next(iter(match or digests)))
        out[path] = (bool(match), now)
    return out


def _by_stat(
    references: list[Fingerprint], facts: Stat | None
) -> tuple[bool, Fingerprint | None] | None:
    """The verdict the stat facts give, or None when the content must be read to tell."""
    if facts is None:
        return (False, None)
    now = Fingerprint(*facts)
    sized = [ref for ref in references if ref.size == now.size]
    if any(ref.same_write(now) for ref in sized):
        return (True, now)
    if now.size <= HASH_SIZE_CAP and any(ref.digest is not None for ref in sized):
        return None
    return (False, now)


def graph_fingerprints(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, Fingerprint]:
    """The graph's fingerprints (stat facts and content hash) for the paths it records."""
    out: dict[str, Fingerprint] = {}
    for start in range(0, len(paths), _QUERY_CHUNK):
        chunk = list(paths[start : start + _QUERY_CHUNK])
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT path, size, mtime_ns, inode, content_hash FROM psg_files "  # noqa: S608
            f"WHERE path IN ({marks}) AND size IS NOT NULL",
            chunk,
        )
        for path, size, mtime_ns, inode, digest in rows:
            out[path] = Fingerprint(int(size), mtime_ns, inode, digest)
    return out

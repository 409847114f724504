"""What the store already records, so that an echo of it is not recorded again.

One save reaches the daemon more than once: Neovim without ``inotifywait`` sends ``didSave``
at once and a watched-file change about 600 ms later, after the first event was sent; a quick
fix that writes a file ("PSG wins", "three-way merge") comes back through the editor's
watcher and through ``mplp-lsp watch``; a second editor on the workspace sees the first one's
saves. None of these is a user edit.

A created or modified path is *already recorded* when the file's content now (its hash, as
the project graph computes it) equals one of:

* the content of the last event this process sent for the path; for a path it has sent
  nothing for since it started (or since the daemon wrote it), the content the project graph
  holds. The graph alone is not enough: it reads the file when it applies an event, so after
  two quick saves it may already hold the second one's content under the first event, and
  the second save would be lost;
* the content the daemon itself last wrote to the path (a quick fix), until different
  content is sent for it. A conflicted merge is written but not recorded, so without this
  its echo would make the graph take the conflict markers and the finding would vanish.

Only the *latest* content counts: a real edit back to an earlier content (A, then B, then A
again) differs from the last one sent (B) and is recorded.

The daemon's writes go through a scratch file next to the target (``.mplp-restore-*``), which
watchers report too; such names never become events (:func:`scratch_name`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Final

from mplp_lsp.runtime.psg_files import HASH_SIZE_CAP, bytes_hash, file_facts

SCRATCH_PREFIX: Final = ".mplp-restore-"
_SENT_LIMIT: Final = 16_384  # paths remembered; older ones fall back on the graph
_QUERY_CHUNK: Final = 500

Fingerprint = tuple[int, str]  # (size, content hash)
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

    def wrote(self, path: str, content: bytes) -> None:
        """The daemon is about to write ``content`` to ``path``: its echo is not an edit.

        The graph is the reference for the path again (the write recorded it, or, for a
        conflicted merge, deliberately did not)."""
        self._own[path] = (len(content), bytes_hash(content))
        self._sent.pop(path, None)

    def forget(self, paths: Iterable[str]) -> None:
        """Deleted or moved paths: content that appears there next is new, whatever it is."""
        for path in paths:
            self._sent.pop(path, None)
            self._own.pop(path, None)

    def _known(self, path: str, graph: dict[str, Fingerprint]) -> set[Fingerprint]:
        last = self._sent.get(path) or graph.get(path)
        return {fingerprint for fingerprint in (last, self._own.get(path)) if fingerprint}

    async def screen(self, paths: Sequence[str]) -> set[str]:
        """Of these created/modified paths, the ones whose content is already recorded.

        The others are remembered as sent.
        """
        if not paths:
            return set()
        unsent = [path for path in paths if path not in self._sent]
        graph = await self._graph(unsent) if self._graph is not None and unsent else {}
        known = {path: self._known(path, graph) for path in paths}
        loop = asyncio.get_running_loop()
        now = await loop.run_in_executor(self._executor, _fingerprints, self._root, paths)
        recorded = set()
        for path in paths:
            current = now.get(path)
            if current is not None and current in known[path]:
                recorded.add(path)
                continue
            self._own.pop(path, None)  # different content was seen: the user's now
            if current is not None:
                self._sent[path] = current
                self._sent.move_to_end(path)
            else:
                self._sent.pop(path, None)  # gone or unhashable: nothing to compare with
        while len(self._sent) > _SENT_LIMIT:
            self._sent.popitem(last=False)
        return recorded


def _fingerprints(root: Path, paths: Iterable[str]) -> dict[str, Fingerprint]:
    """The files' fingerprints now, hashed the way the graph hashes them (no symlinks)."""
    out: dict[str, Fingerprint] = {}
    for path in paths:
        try:
            info = (root / path).stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_size > HASH_SIZE_CAP:
            continue  # too big to hash: never taken for an echo
        facts = file_facts(root / path)
        if facts is not None and facts.content_hash is not None:
            out[path] = (facts.size, facts.content_hash)
    return out


def graph_fingerprints(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, Fingerprint]:
    """The graph's (size, content hash) for the paths it records with a hash."""
    out: dict[str, Fingerprint] = {}
    for start in range(0, len(paths), _QUERY_CHUNK):
        chunk = list(paths[start : start + _QUERY_CHUNK])
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT path, size, content_hash FROM psg_files WHERE path IN ({marks}) "  # noqa: S608
            "AND content_hash IS NOT NULL AND size IS NOT NULL",
            chunk,
        )
        out.update({path: (int(size), str(digest)) for path, size, digest in rows})
    return out

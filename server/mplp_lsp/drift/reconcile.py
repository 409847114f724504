"""The reconciliation strategies of spec §6.5, each recorded in the PSG.

* file system wins: the node takes the disk's facts and content (or is removed when the
  file is gone);
* PSG wins: the recorded content is written back (from the snapshot; else from Git: the
  blob a baseline node's hash names, or the blob at HEAD when it has the recorded hash),
  atomically, keeping the file's mode, never through
  a link (:mod:`mplp_lsp.sanitize.confined`: refused as ``path_symlink_escape``);
* merge: see :mod:`mplp_lsp.drift.merge`; a clean merge is written and recorded, a
  conflicting one is written with markers and the drift stays, with a note.

An editor that has the file open gets the result for its buffer instead
(:meth:`Reconciler.propose`), and the file changes when the editor saves it.

Each resolution that changes the graph returns the ``graph_update`` it causes (built with
:func:`~mplp_lsp.graph.graph_events.graph_update`); the monitor submits it to the intake.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mplp_lsp.drift import merge, records
from mplp_lsp.drift.model import DiskFacts, Drift, Reason, Strategy
from mplp_lsp.graph import snapshots
from mplp_lsp.graph.content_hash import blob_oid, digest_bytes
from mplp_lsp.graph.files import (
    FileFacts,
    delete_node,
    file_facts,
    record_node,
)
from mplp_lsp.graph.graph_events import graph_update
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.sanitize import confined
from mplp_lsp.sources.recorded import SCRATCH_PREFIX
from mplp_lsp.store.writer import StoreWriter

EventFor = Callable[[str], dict[str, Any]]  # graph id -> the graph_update event


@dataclass(frozen=True, slots=True)
class Resolution:
    path: str
    strategy: Strategy
    ok: bool
    message: str
    conflicts: int = 0
    event: EventFor | None = None
    code: str | None = None  # a stable code when the file system refused the resolution

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "strategy": str(self.strategy),
            "ok": self.ok,
            "message": self.message,
            "conflicts": self.conflicts,
        }
        if self.code is not None:
            out["code"] = self.code
        return out


NOT_TEXT = "content_not_text"  # a proposal's refusal: an editor cannot hold this as text
OwnWrite = Callable[[str, bytes], None]  # told before the daemon writes content to a path


class Reconciler:
    def __init__(
        self,
        root: Path,
        writer: StoreWriter,
        snapshot_cap: Callable[[], int],
        own_write: OwnWrite | None = None,
    ) -> None:
        self._root = root
        self._writer = writer
        self._cap = snapshot_cap
        # Watchers report our writes back; told first, so that the echo is never an edit.
        self._own_write = own_write

    async def resolve(
        self, drift: Drift, strategy: Strategy, loop: asyncio.AbstractEventLoop, pool: Executor
    ) -> Resolution:
        if strategy is Strategy.FS:
            return await self._file_system_wins(drift, loop, pool)
        content = await self.recorded_content(drift, strategy, loop, pool)
        if isinstance(content, Resolution):
            return content
        try:
            if strategy is Strategy.PSG:
                return await self._psg_wins(drift, content, loop, pool)
            return await self._merge(drift, content, loop, pool)
        except confined.PathEscape as escape:
            return Resolution(drift.path, strategy, False, escape.message, code=escape.code)

    async def propose(
        self,
        drift: Drift,
        strategy: Strategy,
        editor_text: str,
        loop: asyncio.AbstractEventLoop,
        pool: Executor,
    ) -> Proposal | Resolution:
        """What "PSG wins" or a merge would make of the file, as text for an editor that has
        it open (``editor_text``: its buffer, which is what a merge keeps as *ours*); the
        disk and the graph are left alone. A refusal when the recorded content is missing,
        and one with the code :data:`NOT_TEXT` when it is not UTF-8 text."""
        content = await self.recorded_content(drift, strategy, loop, pool)
        if isinstance(content, Resolution):
            return content
        if strategy is Strategy.MERGE and drift.reason is not Reason.MODIFIED:
            return _cannot_merge(drift)

        def work() -> Proposal:
            disk = confined.read_bytes(self._root, drift.path) or b""
            recorded = editor_form(content, disk, editor_text)
            if strategy is Strategy.PSG:
                return Proposal(drift.path, strategy, recorded, 0)
            base = merge.head_blob(self._root, drift.path)
            merged = merge.merge(
                editor_text.encode(),
                None if base is None else editor_form(base, disk, editor_text).encode(),
                recorded.encode(),
                name=drift.path,
            )
            return Proposal(drift.path, strategy, merged.content.decode(), merged.conflicts)

        try:
            return await loop.run_in_executor(pool, work)
        except confined.PathEscape as escape:
            return Resolution(drift.path, strategy, False, escape.message, code=escape.code)
        except UnicodeDecodeError:
            message = "the file's content is not UTF-8 text"
            return Resolution(drift.path, strategy, False, message, code=NOT_TEXT)
        except (OSError, RuntimeError) as error:
            return Resolution(drift.path, strategy, False, f"merge failed: {error}")

    async def recorded_content(
        self, drift: Drift, strategy: Strategy, loop: asyncio.AbstractEventLoop, pool: Executor
    ) -> bytes | Resolution:
        """The content the PSG recorded for the file (its snapshot, or the blob at HEAD when
        that has the recorded hash); a refusal when there is none."""
        recorded = await self._writer.read(lambda conn: _recorded(conn, drift.path))
        content = recorded[1] if recorded else None
        if recorded is not None and content is None and recorded[0] is not None:
            content = await loop.run_in_executor(pool, self._blob, drift.path, recorded[0])
        if content is None:
            return Resolution(
                drift.path, strategy, False,
                "the PSG holds no recorded content for this file (binary, over the snapshot "
                "size cap, or recorded before snapshots were kept)",
            )  # fmt: skip
        return content

    async def _file_system_wins(
        self, drift: Drift, loop: asyncio.AbstractEventLoop, pool: Executor
    ) -> Resolution:
        path = drift.path
        facts = await loop.run_in_executor(
            pool, lambda: file_facts(self._root / path, snapshot_cap=self._cap())
        )
        now = utc_timestamp()
        if facts is None:
            await self._writer.run(lambda conn: _remove_node(conn, path))
            return Resolution(
                path, Strategy.FS, True, "the PSG no longer records the file",
                event=_event(path, Strategy.FS, "node_delete", -1),
            )  # fmt: skip
        await self._writer.run(lambda conn: _record(conn, path, now, facts))
        return Resolution(
            path, Strategy.FS, True, "the PSG now records the file as it is on disk",
            event=_event(path, Strategy.FS, "node_update", 0),
        )  # fmt: skip

    async def _psg_wins(
        self, drift: Drift, content: bytes, loop: asyncio.AbstractEventLoop, pool: Executor
    ) -> Resolution:
        facts = await loop.run_in_executor(pool, self._write, drift.path, content)
        now = utc_timestamp()
        await self._writer.run(lambda conn: _record(conn, drift.path, now, facts))
        return Resolution(
            drift.path, Strategy.PSG, True, "the recorded content was restored",
            event=_event(drift.path, Strategy.PSG, "node_update", 0),
        )  # fmt: skip

    async def _merge(
        self, drift: Drift, recorded: bytes, loop: asyncio.AbstractEventLoop, pool: Executor
    ) -> Resolution:
        if drift.reason is not Reason.MODIFIED:
            return _cannot_merge(drift)

        def work() -> tuple[int, FileFacts | None]:
            disk = confined.read_bytes(self._root, drift.path)
            if disk is None:
                raise FileNotFoundError(f"{drift.path} is gone")
            base = merge.head_blob(self._root, drift.path)
            merged = merge.merge(disk, base, recorded, name=drift.path)
            return merged.conflicts, self._write(drift.path, merged.content)

        try:
            conflicts, facts = await loop.run_in_executor(pool, work)
        except confined.PathEscape:
            raise
        except (OSError, RuntimeError) as error:
            return Resolution(drift.path, Strategy.MERGE, False, f"merge failed: {error}")
        if conflicts:
            note = (
                f"the merge left {conflicts} conflict(s) marked in the file; edit them, then "
                "choose 'file system wins'"
            )
            disk = (
                DiskFacts(facts.size, facts.mtime_ns, facts.inode or 0, facts.content_hash)
                if facts
                else None
            )
            conflicted = replace(drift, disk=disk, note=note, state="open")
            await self._writer.run(lambda conn: records.put(conn, conflicted))
            return Resolution(drift.path, Strategy.MERGE, False, note, conflicts)
        now = utc_timestamp()
        await self._writer.run(lambda conn: _record(conn, drift.path, now, facts))
        return Resolution(
            drift.path, Strategy.MERGE, True, "merged cleanly; the PSG records the result",
            event=_event(drift.path, Strategy.MERGE, "node_update", 0),
        )  # fmt: skip

    def _blob(self, path: str, recorded_hash: str) -> bytes | None:
        """The recorded content from Git: the blob the hash names (a node of the baseline
        holds its index blob id), else the file's blob at HEAD if it has the recorded hash."""
        oid = blob_oid(recorded_hash)
        blob = (
            merge.object_blob(self._root, oid)
            if oid is not None
            else merge.head_blob(self._root, path)
        )
        if blob is None or digest_bytes(blob, like=recorded_hash) != recorded_hash:
            return None
        return blob

    def _write(self, path: str, content: bytes) -> FileFacts | None:
        """Replace the file atomically (a reader never sees half of it), keeping its mode."""
        if self._own_write is not None:
            self._own_write(path, content)
        confined.write_bytes(self._root, path, content, prefix=SCRATCH_PREFIX)
        return file_facts(self._root / path, snapshot_cap=max(self._cap(), len(content)))


@dataclass(frozen=True, slots=True)
class Proposal:
    """A resolution's result as text for the editor's buffer (:meth:`Reconciler.propose`)."""

    path: str
    strategy: Strategy
    text: str
    conflicts: int  # of a merge; 0 when it merged cleanly


def editor_form(content: bytes, disk: bytes, editor_text: str) -> str:
    """``content`` as the editor holds text. An editor that shows a file with CRLF line ends
    without its CRs (Emacs's ``dos`` files, Vim's ``fileformat=dos``) writes them back
    itself: it gets LF, or every line would end in a stray CR."""
    text = content.decode("utf-8")
    if b"\r\n" in disk and "\r" not in editor_text:
        text = text.replace("\r\n", "\n")
    return text


def _cannot_merge(drift: Drift) -> Resolution:
    return Resolution(
        drift.path, Strategy.MERGE, False, f"cannot merge a file that is {drift.reason}"
    )


def _recorded(conn: sqlite3.Connection, path: str) -> tuple[str | None, bytes | None] | None:
    row = conn.execute("SELECT content_hash FROM psg_files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return None
    digest = row[0]
    return digest, snapshots.content(conn, digest) if digest else None


def _record(conn: sqlite3.Connection, path: str, now: str, facts: FileFacts | None) -> None:
    record_node(conn, path, now, facts)
    records.clear(conn, path)


def _remove_node(conn: sqlite3.Connection, path: str) -> None:
    delete_node(conn, path)
    records.clear(conn, path)


def resolved_event(path: str, strategy: Strategy) -> EventFor:
    """The ``graph_update`` recording that a file's drift was resolved with ``strategy``."""
    return _event(path, strategy, "node_update", 0)


def _event(path: str, strategy: Strategy, kind: Any, delta: int) -> EventFor:
    event_type = "file_node_removed" if kind == "node_delete" else "file_drift_resolved"
    payload = {"node_type": "file", "node_id": path, "cause": "drift", "strategy": str(strategy)}
    return lambda graph: graph_update(graph, kind, event_type, payload, node_delta=delta)

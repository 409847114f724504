"""PSG file nodes: one node per workspace file, kept up to date from file_update events.

For each committed ``file_update`` the node's ``last_modified`` follows the event (spec §6.3),
and its size, mtime and content hash follow the file on disk, read off the event loop. Each
change to the graph emits one ``graph_update`` event through the intake, so it is stored and
forwarded like any other event. A late event (older than what the node already records)
never moves the node backwards: events arrive out of order (spec §6.4).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mplp_lsp.engine.intake import Intake, Submission
from mplp_lsp.graph import snapshots
from mplp_lsp.graph.content_hash import digest_bytes, digest_fd
from mplp_lsp.graph.graph_events import (
    BULK_THRESHOLD,
    UpdateKind,
    bulk_update,
    graph_id,
    graph_update,
)
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.writer import StoreWriter

log = logging.getLogger(__name__)

HASH_SIZE_CAP = 256 * 2**20  # bigger files are tracked by size and mtime only
# A transaction changing more nodes than this is reported as one `bulk` graph_update with
# its deltas (a checkout, a formatter run over the tree), not one event per node.
_CHUNK = 2**20
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class FileFacts:
    size: int
    mtime_ns: int
    content_hash: str | None
    inode: int | None = None
    content: bytes | None = None  # kept as the node's snapshot: a text file under the cap


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    change_type: str
    timestamp: str
    previous_path: str | None
    cause_event_id: str


@dataclass(frozen=True, slots=True)
class GraphChange:
    update_kind: UpdateKind
    node_delta: int
    path: str
    previous_path: str | None
    cause_event_id: str


def content_hash(path: Path) -> str:
    with path.open("rb") as handle:
        return digest_fd(handle.fileno(), os.fstat(handle.fileno()).st_size)


def bytes_hash(data: bytes) -> str:
    return digest_bytes(data)


def file_facts(path: Path, *, snapshot_cap: int = 0) -> FileFacts | None:
    """Size, mtime, inode and hash of a regular file; None if it is gone or not a regular file.

    A text file of at most ``snapshot_cap`` bytes is read whole, and its bytes come back with
    the facts (hashed from the same read, so the snapshot and the hash always agree).

    The file is opened first (non-blocking, not through a symlink) and judged by ``fstat`` of
    that descriptor: a path swapped for a FIFO, a device or a link after any earlier look can
    neither block the worker nor make it read something else.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a fifo, a device, a directory...
            return None
        if info.st_size <= snapshot_cap:
            data = _read(fd, snapshot_cap + 1)
            if len(data) <= snapshot_cap:
                kept = data if snapshots.is_text(data) else None
                return FileFacts(len(data), info.st_mtime_ns, bytes_hash(data), info.st_ino, kept)
            os.lseek(fd, 0, os.SEEK_SET)
        digest = digest_fd(fd, info.st_size) if info.st_size <= HASH_SIZE_CAP else None
    except OSError:
        return None
    finally:
        os.close(fd)
    return FileFacts(info.st_size, info.st_mtime_ns, digest, info.st_ino)


def _read(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    remaining = limit
    while remaining > 0 and (chunk := os.read(fd, min(remaining, _CHUNK))):
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def _instant(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("z", "Z"))


AppliedListener = Callable[[Sequence[FileChange]], Awaitable[None]]


class FileNodes:
    def __init__(
        self,
        root: Path,
        writer: StoreWriter,
        intake: Intake,
        executor: Executor,
        *,
        snapshot_cap: int = 0,
    ) -> None:
        self._root = root
        self._writer = writer
        self._intake = intake
        self._executor = executor
        self._graph_id: str | None = None
        self.snapshot_cap = snapshot_cap
        self._applied: list[AppliedListener] = []

    def on_applied(self, listener: AppliedListener) -> None:
        """Called with each batch of file changes once the PSG has applied it (drift checks)."""
        self._applied.append(listener)

    async def handle(self, events: Sequence[StoredEvent]) -> None:
        changes = [_file_change(event) for event in events if event.kind == Kind.FILE_UPDATE.value]
        if not changes:
            return
        loop = asyncio.get_running_loop()
        facts = await loop.run_in_executor(self._executor, self._gather, changes)
        graph_changes = await self._writer.run(lambda conn: _apply(conn, changes, facts))
        for listener in self._applied:
            await listener(changes)
        if not graph_changes:
            return
        graph_id = await self._ensure_graph_id()
        if len(graph_changes) > BULK_THRESHOLD:
            updates = [_bulk_event(graph_id, graph_changes)]
        else:
            updates = [_graph_event(graph_id, change) for change in graph_changes]
        await self._intake.submit_many([Submission(Kind.GRAPH_UPDATE, u, "psg") for u in updates])

    def _gather(self, changes: Sequence[FileChange]) -> dict[str, FileFacts | None]:
        return {
            change.path: file_facts(self._root / change.path, snapshot_cap=self.snapshot_cap)
            for change in changes
            if change.change_type != "deleted"
        }

    async def _ensure_graph_id(self) -> str:
        if self._graph_id is None:
            self._graph_id = await self._writer.run(graph_id)
        return self._graph_id


def _file_change(event: StoredEvent) -> FileChange:
    payload = event.envelope["payload"]
    return FileChange(
        path=payload["file_path"],
        change_type=payload["change_type"],
        timestamp=payload["timestamp"],
        previous_path=payload.get("previous_path"),
        cause_event_id=event.event_id,
    )


def _apply(
    conn: sqlite3.Connection, changes: Sequence[FileChange], facts: dict[str, FileFacts | None]
) -> list[GraphChange]:
    """Runs on the store's writer thread, inside one transaction."""
    out: list[GraphChange] = []
    for change in changes:
        known = _recorded_at(conn, change.path)
        if known is not None and _instant(known) > _instant(change.timestamp):
            continue  # a late event: the node already records something newer
        if change.change_type == "deleted":
            if known is not None:
                delete_node(conn, change.path)
                out.append(GraphChange("node_delete", -1, change.path, None, change.cause_event_id))
            continue
        moved_from = None
        if change.change_type == "renamed" and change.previous_path:
            moved_from = change.previous_path if delete_node(conn, change.previous_path) else None
        _upsert(conn, change, facts.get(change.path))
        if moved_from is not None:
            delta = 0 if known is None else -1
            out.append(GraphChange("bulk", delta, change.path, moved_from, change.cause_event_id))
        elif known is None:
            out.append(GraphChange("node_add", 1, change.path, None, change.cause_event_id))
        else:
            out.append(GraphChange("node_update", 0, change.path, None, change.cause_event_id))
    return out


def _recorded_at(conn: sqlite3.Connection, path: str) -> str | None:
    row = conn.execute("SELECT last_modified FROM psg_files WHERE path = ?", (path,)).fetchone()
    return None if row is None else str(row[0])


def delete_node(conn: sqlite3.Connection, path: str) -> bool:
    row = conn.execute("DELETE FROM psg_files WHERE path = ? RETURNING content_hash", (path,))
    found = row.fetchone()
    if found is not None:
        snapshots.release(conn, found[0])
    return found is not None


def record_node(
    conn: sqlite3.Connection, path: str, timestamp: str, facts: FileFacts | None
) -> None:
    """Write a file node's facts (and its snapshot); on the writer thread, in a transaction."""
    old = conn.execute("SELECT content_hash FROM psg_files WHERE path = ?", (path,)).fetchone()
    conn.execute(
        "INSERT INTO psg_files(path, last_modified, size, mtime_ns, content_hash, inode, "
        "updated_seq) VALUES (?, ?, ?, ?, ?, ?, COALESCE((SELECT MAX(seq) FROM events), 0)) "
        "ON CONFLICT(path) DO UPDATE SET last_modified = excluded.last_modified, "
        "size = excluded.size, mtime_ns = excluded.mtime_ns, content_hash = excluded.content_hash, "
        "inode = excluded.inode, updated_seq = excluded.updated_seq",
        (
            path,
            timestamp,
            facts.size if facts else None,
            facts.mtime_ns if facts else None,
            facts.content_hash if facts else None,
            facts.inode if facts else None,
        ),
    )
    if facts is not None and facts.content is not None and facts.content_hash is not None:
        snapshots.keep(conn, facts.content_hash, facts.content)
    if old is not None and old[0] != (facts.content_hash if facts else None):
        snapshots.release(conn, old[0])


def _upsert(conn: sqlite3.Connection, change: FileChange, facts: FileFacts | None) -> None:
    record_node(conn, change.path, change.timestamp, facts)


_EVENT_TYPES = {
    "node_add": "file_node_added",
    "node_update": "file_node_updated",
    "node_delete": "file_node_removed",
    "bulk": "file_node_renamed",
}


def _graph_event(graph: str, change: GraphChange) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "node_type": "file",
        "node_id": change.path,
        "cause_event_id": change.cause_event_id,
    }
    if change.previous_path is not None:
        payload["previous_node_id"] = change.previous_path
    return graph_update(
        graph,
        change.update_kind,
        _EVENT_TYPES[change.update_kind],
        payload,
        node_delta=change.node_delta,
    )


def _bulk_event(graph: str, changes: Sequence[GraphChange]) -> dict[str, Any]:
    return bulk_update(
        graph,
        "file_nodes_changed",
        kinds=(change.update_kind for change in changes),
        node_ids=[change.path for change in changes],
        node_delta=sum(change.node_delta for change in changes),
        node_type="file",
    )

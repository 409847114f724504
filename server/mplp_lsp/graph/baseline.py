"""The graph's baseline: file nodes for the files a workspace already holds when it is first
recorded, learnt without a ``file_update`` per file.

A repository opened for the first time has its files and its history already; none of them
was created, modified or deleted by anything the daemon saw. So the baseline adds their nodes
silently and reports the structural change once (spec §6.1: a ``graph_update`` on PSG
structural changes): one ``bulk`` graph_update, event type ``file_nodes_baseline``, with the
number of nodes added as ``node_delta`` and a sample of their ids. One event per file, or a
``file_update`` ``created`` per file, would claim changes that did not happen and send a
remote 100,000 events when a large repository is opened.

Nodes are written in slices (one transaction each), and only where no node exists: an event
the graph applied meanwhile is newer than anything the baseline knows. A node's
``last_modified`` is the file's mtime, but never later than the moment the baseline was cut:
an mtime in the future (an archive, a skewed clock) must not make every later event look
late (:mod:`mplp_lsp.graph.files` never moves a node backwards).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mplp_lsp.graph import snapshots
from mplp_lsp.graph.graph_events import BULK_SAMPLE, bulk_update

EVENT_TYPE = "file_nodes_baseline"


@dataclass(frozen=True, slots=True)
class BaselineNode:
    """A file as the baseline learnt it. Stat facts are None for a file that changed after
    the cut: the node then holds only the content it had (its index blob), so the change is
    still seen as one (by the live sources, or by the next drift scan)."""

    path: str
    last_modified: str
    size: int | None
    mtime_ns: int | None
    inode: int | None
    content_hash: str | None
    content: bytes | None = None  # kept as the node's snapshot (text under the cap)


def learn(conn: sqlite3.Connection, nodes: Sequence[BaselineNode]) -> int:
    """Add the nodes the graph does not have yet; how many were added. On the writer
    thread, inside one transaction."""
    before = conn.total_changes
    conn.executemany(
        "INSERT INTO psg_files(path, last_modified, size, mtime_ns, content_hash, inode, "
        "updated_seq) VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT(path) DO NOTHING",
        [
            (node.path, node.last_modified, node.size, node.mtime_ns, node.content_hash, node.inode)
            for node in nodes
        ],
    )
    added = conn.total_changes - before
    for node in nodes:
        if node.content is not None and node.content_hash is not None:
            snapshots.keep(conn, node.content_hash, node.content)
    return added


class Tally:
    """What a baseline added, for its one ``graph_update``: a count and the first ids."""

    def __init__(self) -> None:
        self.count = 0
        self.sample: list[str] = []

    def add(self, nodes: Sequence[BaselineNode], added: int) -> None:
        """``added`` of ``nodes`` were new to the graph (the others got an event of their
        own meanwhile, which is newer)."""
        self.count += added
        room = min(added, BULK_SAMPLE - len(self.sample))
        self.sample.extend(node.path for node in nodes[: max(0, room)])

    def event(self, graph: str) -> dict[str, Any]:
        return bulk_update(
            graph,
            EVENT_TYPE,
            kinds=itertools.repeat("node_add", self.count),
            node_ids=self.sample,
            node_delta=self.count,
            total=self.count,
            node_type="file",
            cause="baseline",
        )


__all__ = ["EVENT_TYPE", "BaselineNode", "Tally", "learn"]

"""PSG commit records: commit, author and branch nodes kept from committed git_events.

Spec §6.3: a git_event "creates a commit record keyed by commit_id, links it to branch and
author nodes". A ``commit`` or ``merge`` adds the commit (with its parent edges), its author
and its branch when they are new, and the commit→branch link; ``branch_create`` adds a
branch node and ``branch_delete`` removes it with its links. Every change is reported by one
``graph_update`` event; a transaction changing many nodes (a catch-up) by one ``bulk`` event.
Events are idempotent here: a commit seen again changes nothing.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mplp_lsp.intake import Intake, Submission
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.runtime.psg.graph_events import (
    BULK_THRESHOLD,
    UpdateKind,
    bulk_update,
    graph_id,
    graph_update,
)
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.writer import StoreWriter


@dataclass(frozen=True, slots=True)
class GraphChange:
    update_kind: UpdateKind
    event_type: str
    node_type: str
    node_id: str
    node_delta: int
    edge_delta: int
    cause_event_id: str


class CommitGraph:
    def __init__(self, writer: StoreWriter, intake: Intake) -> None:
        self._writer = writer
        self._intake = intake
        self._graph_id: str | None = None

    async def handle(self, events: Sequence[StoredEvent]) -> None:
        git_events = [event for event in events if event.kind == Kind.GIT.value]
        if not git_events:
            return
        changes = await self._writer.run(lambda conn: apply_git_events(conn, git_events))
        if not changes:
            return
        if self._graph_id is None:
            self._graph_id = await self._writer.run(graph_id)
        if len(changes) > BULK_THRESHOLD:
            updates = [_bulk_event(self._graph_id, changes)]
        else:
            updates = [_graph_event(self._graph_id, change) for change in changes]
        await self._intake.submit_many([Submission(Kind.GRAPH_UPDATE, u, "psg") for u in updates])


def author_id(name: str | None, email: str | None) -> str:
    key = f"{name or ''}\0{email or ''}".encode(errors="surrogatepass")
    return hashlib.blake2b(key, digest_size=12).hexdigest()


def apply_git_events(conn: sqlite3.Connection, events: Sequence[StoredEvent]) -> list[GraphChange]:
    """Runs on the store's writer thread, inside one transaction."""
    out: list[GraphChange] = []
    for event in events:
        payload = event.envelope["payload"]
        kind, ref, cause = payload["event_kind"], payload["ref_name"], event.event_id
        is_branch = ref.startswith("refs/heads/")
        if kind in ("commit", "merge"):
            out += _add_commit(conn, payload, ref if is_branch else None, cause)
        elif kind == "branch_create" and is_branch:
            if _ensure_branch(conn, ref, payload["commit_id"]):
                out.append(GraphChange("node_add", "branch_node_added", "branch", ref, 1, 0, cause))
        elif kind == "branch_delete" and is_branch:
            links = conn.execute(
                "SELECT COUNT(*) FROM psg_commit_branches WHERE ref_name = ?", (ref,)
            ).fetchone()[0]
            if conn.execute("DELETE FROM psg_branches WHERE ref_name = ?", (ref,)).rowcount:
                out.append(
                    GraphChange(
                        "node_delete", "branch_node_removed", "branch", ref, -1, -links, cause
                    )
                )
    return out


def _add_commit(
    conn: sqlite3.Connection, payload: dict[str, Any], branch: str | None, cause: str
) -> list[GraphChange]:
    out: list[GraphChange] = []
    commit = payload["commit_id"]
    name, email = payload.get("author_name"), payload.get("author_email")
    author = author_id(name, email) if name or email else None
    if author is not None and _insert(
        conn, "INSERT OR IGNORE INTO psg_authors VALUES (?, ?, ?)", (author, name, email)
    ):
        out.append(GraphChange("node_add", "author_node_added", "author", author, 1, 0, cause))
    if branch is not None and _ensure_branch(conn, branch, commit):
        out.append(GraphChange("node_add", "branch_node_added", "branch", branch, 1, 0, cause))
    new_commit = _insert(
        conn,
        "INSERT OR IGNORE INTO psg_commits VALUES "
        "(?, ?, ?, ?, COALESCE((SELECT MAX(seq) FROM events), 0))",
        (commit, author, payload["timestamp"], payload.get("commit_message")),
    )
    edges = 0
    if new_commit:
        parents = payload.get("parent_commits", [])
        conn.executemany(
            "INSERT INTO psg_commit_parents VALUES (?, ?, ?)",
            [(commit, position, parent) for position, parent in enumerate(parents)],
        )
        edges += len(parents) + (author is not None)
    if branch is not None:
        linked = _insert(
            conn, "INSERT OR IGNORE INTO psg_commit_branches VALUES (?, ?)", (commit, branch)
        )
        edges += linked
        conn.execute("UPDATE psg_branches SET head_commit = ? WHERE ref_name = ?", (commit, branch))
        if linked and not new_commit:
            out.append(
                GraphChange("edge_add", "commit_branch_linked", "commit", commit, 0, 1, cause)
            )
            return out
    if new_commit:
        out.append(GraphChange("node_add", "commit_node_added", "commit", commit, 1, edges, cause))
    return out


def _ensure_branch(conn: sqlite3.Connection, ref: str, head: str) -> bool:
    return _insert(conn, "INSERT OR IGNORE INTO psg_branches VALUES (?, ?)", (ref, head))


def _insert(conn: sqlite3.Connection, sql: str, values: tuple[Any, ...]) -> bool:
    return conn.execute(sql, values).rowcount > 0


def _graph_event(graph: str, change: GraphChange) -> dict[str, Any]:
    return graph_update(
        graph,
        change.update_kind,
        change.event_type,
        {
            "node_type": change.node_type,
            "node_id": change.node_id,
            "cause_event_id": change.cause_event_id,
        },
        node_delta=change.node_delta,
        edge_delta=change.edge_delta,
    )


def _bulk_event(graph: str, changes: Sequence[GraphChange]) -> dict[str, Any]:
    return bulk_update(
        graph,
        "git_nodes_changed",
        kinds=(change.event_type for change in changes),
        node_ids=[change.node_id for change in changes],
        node_delta=sum(change.node_delta for change in changes),
        edge_delta=sum(change.edge_delta for change in changes),
        node_types=sorted({change.node_type for change in changes}),
    )

"""PSG commit records: commit, author, branch and tag nodes kept from committed git_events.

Spec §6.3: a git_event "creates a commit record keyed by commit_id, links it to branch and
author nodes"; §2.3: every ``*_id`` reference resolves to a node. So every kind records
its commit:

* ``commit``/``merge``: the commit (with its parent edges), its author and its branch when
  new, and the commit→branch link;
* ``push``: the pushed commit, linked to the remote-tracking branch (a branch node too);
* ``tag``: the tagged commit and a tag node naming it;
* ``branch_create``: the branch node and the commit it starts at; ``branch_delete`` removes
  the branch node with its links (the commits stay).

A commit the graph meets only as a reference (the commit of a push, a tag or a new branch,
the parent of a recorded commit) becomes a node with what the repository says of it
(:mod:`mplp_lsp.graph.repository_commits`): author, time, subject, not its own
parents. Should its own ``commit`` event come later, it gains its parent edges then. A
parent the repository does not have (a shallow clone's boundary) gets no edge: no reference
dangles. Every change is reported by one ``graph_update`` event; a transaction changing many
nodes (a catch-up) by one ``bulk`` event. Events are idempotent here: a commit seen again
changes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mplp_lsp.engine.intake import Intake, Submission
from mplp_lsp.graph.graph_events import (
    BULK_THRESHOLD,
    UpdateKind,
    bulk_update,
    graph_id,
    graph_update,
)
from mplp_lsp.graph.repository_commits import Commit, RepositoryCommits
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.writer import StoreWriter

_COMMITTING = ("commit", "merge")
_BRANCHES = "refs/heads/"
_REMOTE_BRANCHES = "refs/remotes/"


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
    def __init__(
        self, writer: StoreWriter, intake: Intake, commits: RepositoryCommits | None = None
    ) -> None:
        self._writer = writer
        self._intake = intake
        self._commits = commits
        self._graph_id: str | None = None

    async def handle(self, events: Sequence[StoredEvent]) -> None:
        git_events = [event for event in events if event.kind == Kind.GIT.value]
        if not git_events:
            return
        wanted = await self._writer.read(lambda conn: referenced_unknown(conn, git_events))
        found: dict[str, Commit] = {}
        if wanted and self._commits is not None:
            found = await asyncio.to_thread(self._commits.read, wanted)
        changes = await self._writer.run(lambda conn: apply_git_events(conn, git_events, found))
        if not changes:
            return
        if self._graph_id is None:
            self._graph_id = await self._writer.run(graph_id)
        if len(changes) > BULK_THRESHOLD:
            updates = [_bulk_event(self._graph_id, changes)]
        else:
            updates = [_graph_event(self._graph_id, change) for change in changes]
        await self._intake.submit_many([Submission(Kind.GRAPH_UPDATE, u, "psg") for u in updates])

    def close(self) -> None:
        if self._commits is not None:
            self._commits.close()


def author_id(name: str | None, email: str | None) -> str:
    key = f"{name or ''}\0{email or ''}".encode(errors="surrogatepass")
    return hashlib.blake2b(key, digest_size=12).hexdigest()


def referenced_unknown(conn: sqlite3.Connection, events: Sequence[StoredEvent]) -> list[str]:
    """The commits ``events`` name (as their commit or a parent) that are no node yet and
    that the events do not describe themselves: what to read from the repository."""
    described: set[str] = set()
    named: list[str] = []
    for event in events:
        payload = event.envelope["payload"]
        if payload["event_kind"] in _COMMITTING:
            described.add(payload["commit_id"])
            named += payload.get("parent_commits", [])
        else:
            named.append(payload["commit_id"])
    wanted = [oid for oid in dict.fromkeys(named) if oid not in described]
    return [oid for oid in wanted if not _exists(conn, oid)]


def apply_git_events(
    conn: sqlite3.Connection, events: Sequence[StoredEvent], found: Mapping[str, Commit]
) -> list[GraphChange]:
    """Runs on the store's writer thread, inside one transaction. ``found``: commits read
    from the repository for the ones the events only name."""
    out: list[GraphChange] = []
    described = {
        payload["commit_id"]: payload
        for payload in (event.envelope["payload"] for event in events)
        if payload["event_kind"] in _COMMITTING
    }
    for event in events:
        payload = event.envelope["payload"]
        kind, ref, cause = payload["event_kind"], payload["ref_name"], event.event_id
        commit = payload["commit_id"]
        if kind in _COMMITTING:
            branch = ref if ref.startswith(_BRANCHES) else None
            out += _add_commit(conn, payload, branch, found, described, cause)
            continue
        if kind == "branch_delete":
            if ref.startswith(_BRANCHES):
                out += _remove_branch(conn, ref, cause)
            continue
        out += _referenced(conn, commit, payload, found.get(commit), cause)
        if kind == "branch_create" and ref.startswith(_BRANCHES):
            if _ensure_branch(conn, ref, commit):
                out.append(GraphChange("node_add", "branch_node_added", "branch", ref, 1, 0, cause))
        elif kind == "push" and ref.startswith(_REMOTE_BRANCHES):
            added, linked = _link(conn, commit, ref, cause)
            out += added
            if linked:
                out.append(_linked(commit, cause))
        elif kind == "tag":
            out += _tag(conn, ref, commit, payload["timestamp"], cause)
    return out


def _add_commit(
    conn: sqlite3.Connection,
    payload: dict[str, Any],
    branch: str | None,
    found: Mapping[str, Commit],
    described: Mapping[str, dict[str, Any]],
    cause: str,
) -> list[GraphChange]:
    out: list[GraphChange] = []
    commit = payload["commit_id"]
    author, added = _ensure_author(conn, payload.get("author_name"), payload.get("author_email"))
    if added:
        out.append(_author_added(author, cause))
    new_commit = _insert(
        conn,
        "INSERT OR IGNORE INTO psg_commits VALUES "
        "(?, ?, ?, ?, COALESCE((SELECT MAX(seq) FROM events), 0))",
        (commit, author, payload["timestamp"], payload.get("commit_message")),
    )
    edges = int(new_commit and author is not None)
    recorded = conn.execute(
        "SELECT 1 FROM psg_commit_parents WHERE commit_id = ? LIMIT 1", (commit,)
    ).fetchone()
    if recorded is None:  # new, or known so far only as a reference
        parents = [
            parent
            for parent in payload.get("parent_commits", [])
            if parent in found or parent in described or _exists(conn, parent)
        ]
        for parent in parents:
            out += _referenced(conn, parent, described.get(parent, {}), found.get(parent), cause)
        conn.executemany(
            "INSERT INTO psg_commit_parents VALUES (?, ?, ?)",
            [(commit, position, parent) for position, parent in enumerate(parents)],
        )
        edges += len(parents)
    linked = False
    if branch is not None:
        branch_added, linked = _link(conn, commit, branch, cause)
        out += branch_added
    if new_commit:
        edges += linked
        out.append(GraphChange("node_add", "commit_node_added", "commit", commit, 1, edges, cause))
        return out
    if edges:
        out.append(
            GraphChange("edge_add", "commit_parents_linked", "commit", commit, 0, edges, cause)
        )
    if linked:
        out.append(_linked(commit, cause))
    return out


def _referenced(
    conn: sqlite3.Connection,
    commit: str,
    payload: Mapping[str, Any],
    read: Commit | None,
    cause: str,
) -> list[GraphChange]:
    """A node for a commit only named (by a push, a tag, a branch, a child): what the
    repository says of it, else what the event says."""
    if _exists(conn, commit):
        return []
    out: list[GraphChange] = []
    name: str | None
    email: str | None
    subject: str | None
    if read is not None:
        name, email, subject = read.author_name, read.author_email, read.subject
        moment = utc_timestamp(datetime.fromtimestamp(read.committed_at, UTC))
    else:
        name, email = payload.get("author_name"), payload.get("author_email")
        subject = payload.get("commit_message")
        moment = str(payload.get("timestamp") or utc_timestamp())
    author, added = _ensure_author(conn, name, email)
    if added:
        out.append(_author_added(author, cause))
    conn.execute(
        "INSERT INTO psg_commits VALUES (?, ?, ?, ?, COALESCE((SELECT MAX(seq) FROM events), 0))",
        (commit, author, moment, subject),
    )
    edges = int(author is not None)
    out.append(GraphChange("node_add", "commit_node_added", "commit", commit, 1, edges, cause))
    return out


def _link(
    conn: sqlite3.Connection, commit: str, branch: str, cause: str
) -> tuple[list[GraphChange], bool]:
    """``commit`` on ``branch``, its head now: the branch node when it is new, and whether
    the link is."""
    added = []
    if _ensure_branch(conn, branch, commit):
        added.append(GraphChange("node_add", "branch_node_added", "branch", branch, 1, 0, cause))
    conn.execute("UPDATE psg_branches SET head_commit = ? WHERE ref_name = ?", (commit, branch))
    linked = _insert(
        conn, "INSERT OR IGNORE INTO psg_commit_branches VALUES (?, ?)", (commit, branch)
    )
    return added, linked


def _linked(commit: str, cause: str) -> GraphChange:
    return GraphChange("edge_add", "commit_branch_linked", "commit", commit, 0, 1, cause)


def _author_added(author: str | None, cause: str) -> GraphChange:
    return GraphChange("node_add", "author_node_added", "author", author or "", 1, 0, cause)


def _tag(
    conn: sqlite3.Connection, ref: str, commit: str, moment: str, cause: str
) -> list[GraphChange]:
    row = conn.execute("SELECT commit_id FROM psg_tags WHERE ref_name = ?", (ref,)).fetchone()
    if row is not None and row[0] == commit:
        return []
    conn.execute("INSERT OR REPLACE INTO psg_tags VALUES (?, ?, ?)", (ref, commit, moment))
    if row is None:
        return [GraphChange("node_add", "tag_node_added", "tag", ref, 1, 1, cause)]
    return [GraphChange("node_update", "tag_node_moved", "tag", ref, 0, 0, cause)]


def _remove_branch(conn: sqlite3.Connection, ref: str, cause: str) -> list[GraphChange]:
    links = conn.execute(
        "SELECT COUNT(*) FROM psg_commit_branches WHERE ref_name = ?", (ref,)
    ).fetchone()[0]
    if not conn.execute("DELETE FROM psg_branches WHERE ref_name = ?", (ref,)).rowcount:
        return []
    return [GraphChange("node_delete", "branch_node_removed", "branch", ref, -1, -links, cause)]


def _ensure_author(
    conn: sqlite3.Connection, name: str | None, email: str | None
) -> tuple[str | None, bool]:
    """The author's node id (None for no author at all), and whether it is new."""
    if not (name or email):
        return None, False
    author = author_id(name, email)
    added = _insert(
        conn, "INSERT OR IGNORE INTO psg_authors VALUES (?, ?, ?)", (author, name, email)
    )
    return author, added


def _ensure_branch(conn: sqlite3.Connection, ref: str, head: str) -> bool:
    return _insert(conn, "INSERT OR IGNORE INTO psg_branches VALUES (?, ?)", (ref, head))


def _exists(conn: sqlite3.Connection, commit: str) -> bool:
    found = conn.execute("SELECT 1 FROM psg_commits WHERE commit_id = ?", (commit,)).fetchone()
    return found is not None


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

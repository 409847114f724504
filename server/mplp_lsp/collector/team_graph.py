"""The team project graph: every forwarded integration event folded into shared tables.

The local PSG's rules (spec §6.3), per repository (``repo_url``): a ``commit``/``merge``
git_event records the commit (parents, author as a hash of the address, never the address),
links it to its branch and moves the branch head; ``branch_create`` and ``branch_delete``
add and remove a branch; a ``file_update`` sets the file's last modification and who made it
(the forwarding stream, which the repository's git events tie to ``repo_url``); a ``ci_event``
moves its pipeline run forward (``pipeline_stage`` on each status change) with its stages.

Many workstations deliver in any order and may deliver twice, so every rule is a join: the
state kept for a key is the greatest by an order that does not depend on arrival (time, then
event id; for runs, status rank first). Applying the same events in any order gives the same
rows; an event is applied once, when it is first stored (the collector folds only the
events a batch added). The local PSG differs in one place: there a run's first final
status sticks; here the later final status wins (a re-run that succeeds after a failure),
the only choice that does not depend on which one arrived first.

Clocks: a workstation whose clock runs ahead would stamp its changes in the future, and a
last-writer-wins key holding a future time ignores every real change until the wall clock
catches up. So any time more than :data:`CLOCK_AHEAD_BOUND` ahead of the moment the
collector received the event is clamped to that moment, and the node is flagged
(``clamped``). The clamp is decided once, when the event is first stored.

:func:`fold` reduces a batch in Python (a statement may change a row only once) and
:func:`apply` writes it with one statement per table, in key order, inside the batch's
transaction.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

import orjson
from psycopg import AsyncConnection, AsyncCursor

from mplp_lsp.graph.changes import pipeline_stage
from mplp_lsp.graph.graph_events import BULK_SAMPLE, UpdateKind, graph_update
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import Kind

__all__ = [
    "CLOCK_AHEAD_BOUND",
    "Clock",
    "GraphBatch",
    "ahead_of",
    "apply",
    "author_hash",
    "emitted_rows",
    "fold",
    "instant",
    "run_node_id",
]

# How far ahead of its receipt an event's time may be before it counts as a wrong clock:
# well above any clock drift NTP leaves and the time a batch waits in an outbox is behind,
# not ahead, so only a clock set wrong (or a hand-made time) goes past it.
CLOCK_AHEAD_BOUND: Final = timedelta(minutes=5)

_RANK: Final = {"pending": 0, "running": 1, "succeeded": 2, "failed": 2, "cancelled": 2}
_STAGE: Final = {
    "pending": "pending",
    "running": "running",
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "failed",
}
_BRANCH_PREFIX: Final = "refs/heads/"


def instant(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("z", "Z"))


def author_hash(email: str) -> str:
    """The address as the graph keeps it: a hash, so the team tables hold no addresses."""
    normalized = email.strip().lower().encode(errors="surrogatepass")
    return hashlib.blake2b(normalized, digest_size=12).hexdigest()


@dataclass
class Clock:
    """Clamps the times of events received at ``received``; counts what it clamped."""

    received: datetime
    bound: timedelta = CLOCK_AHEAD_BOUND
    clamped: int = 0  # events with at least one time clamped
    _clamped_now: bool = False

    def next_event(self) -> None:
        self._clamped_now = False

    def __call__(self, moment: datetime) -> datetime:
        if moment - self.received <= self.bound:
            return moment
        if not self._clamped_now:
            self._clamped_now = True
            self.clamped += 1
        return self.received

    @property
    def clamping(self) -> bool:
        """Whether a time of the current event was clamped."""
        return self._clamped_now


@dataclass
class GraphBatch:
    """One batch's graph facts, reduced per key with the same join the SQL applies.

    Node states carry a last ``clamped`` flag: whether their time is a clamped one."""

    repositories: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)
    stream_repositories: set[tuple[str, str]] = field(default_factory=set)
    branches: dict[tuple[str, str], tuple[datetime, str, bool, str, bool]] = field(
        default_factory=dict
    )
    commits: dict[tuple[str, str], tuple[str, str | None, datetime, str | None, bool]] = field(
        default_factory=dict
    )
    parents: set[tuple[str, str, int, str]] = field(default_factory=set)
    commit_branches: set[tuple[str, str, str]] = field(default_factory=set)
    files: dict[tuple[str, str], tuple[datetime, str, bool, str, bool]] = field(
        default_factory=dict
    )
    runs: dict[tuple[str, str, str], _Run] = field(default_factory=dict)
    people: dict[str, tuple[datetime, str]] = field(default_factory=dict)  # hash: (when, name)

    def __bool__(self) -> bool:
        return bool(self.repositories or self.files or self.runs)


@dataclass(frozen=True, slots=True)
class _Run:
    order: tuple[int, datetime, str]  # (status rank, when, cause): the greatest wins
    stream: str
    status: str
    first_seen: datetime
    started_at: datetime | None
    completed_at: datetime | None
    duration_ms: int | None
    branch_name: str | None
    commit_id: str | None
    stages: str
    clamped: bool


K = TypeVar("K")
V = TypeVar("V", bound=tuple[Any, ...])


def ahead_of(
    times: Iterable[tuple[str, datetime]], received: datetime, bound: timedelta = CLOCK_AHEAD_BOUND
) -> dict[str, timedelta]:
    """The events whose own time (``times``: event id, the envelope's time as an
    :func:`instant`) is more than ``bound`` ahead of ``received`` (a clock set wrong), by
    event id, with how far ahead."""
    latest = received + bound
    return {event_id: moment - received for event_id, moment in times if moment > latest}


def _newer(table: dict[K, V], key: K, value: V) -> None:
    old = table.get(key)
    if old is None or value[:2] > old[:2]:
        table[key] = value


def fold(items: Iterable[tuple[str, Kind | None, Mapping[str, Any]]], clock: Clock) -> GraphBatch:
    """The graph facts of (stream, kind, envelope) items; other kinds add nothing. Times
    too far ahead of ``clock.received`` are clamped to it."""
    batch = GraphBatch()
    for stream, kind, envelope in items:
        clock.next_event()
        if kind is Kind.GIT:
            _fold_git(batch, stream, envelope, clock)
        elif kind is Kind.FILE_UPDATE:
            _fold_file(batch, stream, envelope, clock)
        elif kind is Kind.CI:
            _fold_ci(batch, stream, envelope, clock)
    return batch


def _fold_git(batch: GraphBatch, stream: str, envelope: Mapping[str, Any], clock: Clock) -> None:
    payload, cause = envelope["payload"], envelope["event_id"]
    repo, ref, commit = payload["repo_url"], payload["ref_name"], payload["commit_id"]
    when = clock(instant(payload["timestamp"]))
    clamped = clock.clamping
    first, last = batch.repositories.get(repo, (when, when))
    batch.repositories[repo] = (min(first, when), max(last, when))
    batch.stream_repositories.add((stream, repo))
    event_kind = payload["event_kind"]
    branch = ref if ref.startswith(_BRANCH_PREFIX) else None
    if event_kind in ("commit", "merge"):
        email = payload.get("author_email")
        author = author_hash(email) if email else None
        name = payload.get("author_name")
        if author is not None and isinstance(name, str) and name.strip():
            _newer(batch.people, author, (when, name.strip()))
        old = batch.commits.get((repo, commit))
        if old is None or cause < old[0]:
            message = payload.get("commit_message")
            batch.commits[(repo, commit)] = (cause, author, when, message, clamped)
        for position, parent in enumerate(payload.get("parent_commits") or ()):
            batch.parents.add((repo, commit, position, parent))
        if branch is not None:
            batch.commit_branches.add((repo, commit, branch))
            _newer(batch.branches, (repo, branch), (when, cause, True, commit, clamped))
    elif event_kind in ("branch_create", "branch_delete") and branch is not None:
        present = event_kind == "branch_create"
        _newer(batch.branches, (repo, branch), (when, cause, present, commit, clamped))


def _fold_file(batch: GraphBatch, stream: str, envelope: Mapping[str, Any], clock: Clock) -> None:
    payload, cause = envelope["payload"], envelope["event_id"]
    when = clock(instant(payload["timestamp"]))
    clamped = clock.clamping
    change = payload["change_type"]
    state = (when, cause, change != "deleted", change, clamped)
    _newer(batch.files, (stream, payload["file_path"]), state)
    previous = payload.get("previous_path")
    if change == "renamed" and previous:
        _newer(batch.files, (stream, previous), (when, cause, False, "renamed_away", clamped))


def _fold_ci(batch: GraphBatch, stream: str, envelope: Mapping[str, Any], clock: Clock) -> None:
    payload, cause = envelope["payload"], envelope["event_id"]
    status = payload["status"]
    received = clock(instant(envelope["timestamp"]))
    started = _clamped(clock, _optional_instant(payload.get("started_at")))
    completed = _clamped(clock, _optional_instant(payload.get("completed_at")))
    # The run's own clock when it has one (as the local PSG): the envelope time is when we
    # heard of it.
    happened = (completed if _RANK[status] == 2 else started if status == "running" else None) or (
        received
    )
    key = (payload["ci_provider"], payload["pipeline_id"], payload["run_id"])
    run = _Run(
        order=(_RANK[status], happened, cause),
        stream=stream,
        status=status,
        first_seen=received,
        started_at=started,
        completed_at=completed,
        duration_ms=payload.get("duration_ms"),
        branch_name=payload.get("branch_name"),
        commit_id=payload.get("commit_id"),
        stages=orjson.dumps(payload.get("stages") or []).decode(),
        clamped=clock.clamping,
    )
    old = batch.runs.get(key)
    if old is not None:
        earliest = _least(old.started_at, run.started_at)
        first_seen = min(old.first_seen, run.first_seen)
        run = max(old, run, key=lambda r: r.order)
        run = _Run(**{**_fields(run), "first_seen": first_seen, "started_at": earliest})
    batch.runs[key] = run


def _fields(run: _Run) -> dict[str, Any]:
    return {name: getattr(run, name) for name in _Run.__slots__}


def _clamped(clock: Clock, moment: datetime | None) -> datetime | None:
    return None if moment is None else clock(moment)


def _least(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _optional_instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return instant(value)
    except ValueError:
        return None


def run_node_id(key: tuple[str, str, str]) -> str:
    """A pipeline run's node id: a UUID v4-shaped hash of its key, the same on every instance."""
    digest = bytearray(hashlib.blake2b("\0".join(key).encode(), digest_size=16).digest())
    digest[6] = (digest[6] & 0x0F) | 0x40
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


# --- writing -------------------------------------------------------------------------------


def _from_rows(*types: str) -> str:
    """A SELECT of rows sent as one JSON array of arrays (one parameter, written by orjson
    in C); binding one array per column costs Python work per element."""
    cells = ", ".join(f"(e->>{i})::{t}" for i, t in enumerate(types))
    return f"SELECT {cells} FROM jsonb_array_elements(%s::jsonb) AS e"  # noqa: S608


_LWW_BRANCH: Final = f"""
INSERT INTO team_branches AS t (repo_url, ref_name, changed_at, cause, present, head_commit,
                                clamped)
{_from_rows("text", "text", "timestamptz", "text", "bool", "text", "bool")}
ON CONFLICT (repo_url, ref_name) DO UPDATE
SET changed_at = excluded.changed_at, cause = excluded.cause, present = excluded.present,
    head_commit = excluded.head_commit, clamped = excluded.clamped
WHERE (excluded.changed_at, excluded.cause) > (t.changed_at, t.cause)
RETURNING t.repo_url, t.ref_name, t.present, (xmax = 0) AS added
"""
_LWW_FILE: Final = f"""
INSERT INTO team_files AS t (stream, path, modified_at, cause, present, change_type, clamped)
{_from_rows("text", "text", "timestamptz", "text", "bool", "text", "bool")}
ON CONFLICT (stream, path) DO UPDATE
SET modified_at = excluded.modified_at, cause = excluded.cause, present = excluded.present,
    change_type = excluded.change_type, clamped = excluded.clamped
WHERE (excluded.modified_at, excluded.cause) > (t.modified_at, t.cause)
RETURNING t.stream, t.path, t.present, (xmax = 0) AS added
"""
_REPOSITORIES: Final = f"""
INSERT INTO team_repositories AS t (repo_url, first_seen, last_seen)
{_from_rows("text", "timestamptz", "timestamptz")}
ON CONFLICT (repo_url) DO UPDATE
SET first_seen = least(t.first_seen, excluded.first_seen),
    last_seen = greatest(t.last_seen, excluded.last_seen)
WHERE excluded.first_seen < t.first_seen OR excluded.last_seen > t.last_seen
RETURNING t.repo_url, (xmax = 0) AS added
"""
_STREAM_REPOSITORIES: Final = f"""
INSERT INTO team_stream_repositories (stream, repo_url)
{_from_rows("text", "text")} ON CONFLICT DO NOTHING
"""
_COMMITS: Final = f"""
INSERT INTO team_commits AS t (repo_url, commit_id, cause, author, committed_at, message,
                               clamped)
{_from_rows("text", "text", "text", "text", "timestamptz", "text", "bool")}
ON CONFLICT (repo_url, commit_id) DO UPDATE
SET cause = excluded.cause, author = excluded.author, committed_at = excluded.committed_at,
    message = excluded.message, clamped = excluded.clamped
WHERE excluded.cause < t.cause
RETURNING t.commit_id, (xmax = 0) AS added
"""
_PEOPLE: Final = f"""
INSERT INTO team_people AS t (author, named_at, name)
{_from_rows("text", "timestamptz", "text")}
ON CONFLICT (author) DO UPDATE SET named_at = excluded.named_at, name = excluded.name
WHERE (excluded.named_at, excluded.name) > (t.named_at, t.name)
"""
_PARENTS: Final = f"""
INSERT INTO team_commit_parents (repo_url, commit_id, position, parent)
{_from_rows("text", "text", "int4", "text")} ON CONFLICT DO NOTHING
"""
_COMMIT_BRANCHES: Final = f"""
INSERT INTO team_commit_branches (repo_url, commit_id, ref_name)
{_from_rows("text", "text", "text")} ON CONFLICT DO NOTHING
"""
_NEWER_RUN: Final = (
    "(excluded.status_rank, excluded.status_at, excluded.cause)"
    " > (t.status_rank, t.status_at, t.cause)"
)
_RUN_STATE: Final = (
    "status",
    "status_rank",
    "status_at",
    "cause",
    "stream",
    "completed_at",
    "duration_ms",
    "branch_name",
    "commit_id",
    "stages",
    "clamped",
)
_RUNS: Final = (  # built from this module's constants only
    "INSERT INTO team_pipeline_runs AS t (ci_provider, pipeline_id, run_id, node_id,"
    " first_seen, started_at, " + ", ".join(_RUN_STATE) + ")"
    " "
    + _from_rows(
        *("text", "text", "text", "text", "timestamptz", "timestamptz", "text", "int4"),
        *("timestamptz", "text", "text", "timestamptz", "int8", "text", "text", "jsonb", "bool"),
    )
    + " ON CONFLICT (ci_provider, pipeline_id, run_id) DO UPDATE SET"
    " first_seen = least(t.first_seen, excluded.first_seen),"
    " started_at = coalesce(least(t.started_at, excluded.started_at), t.started_at,"
    " excluded.started_at), "
    + ", ".join(
        f"{c} = CASE WHEN {_NEWER_RUN} THEN excluded.{c} ELSE t.{c} END" for c in _RUN_STATE
    )
    + f" WHERE {_NEWER_RUN} OR excluded.first_seen < t.first_seen"
    " OR excluded.started_at < t.started_at"
    " OR (t.started_at IS NULL AND excluded.started_at IS NOT NULL)"
    " RETURNING t.node_id, t.run_id, t.pipeline_id, t.ci_provider, t.status, t.status_at,"
    " t.cause"
)


async def apply(conn: AsyncConnection[Any], batch: GraphBatch, graph: str) -> list[dict[str, Any]]:
    """Write the batch's facts; returns the graph_update/pipeline_stage events it caused.

    Every statement is sent before any result is read, so in pipeline mode (the caller's)
    the whole graph costs one round trip.
    """
    repositories = commits = branches = files = runs = None
    if batch.repositories:
        repositories = await _send(
            conn, _REPOSITORIES, [(k, *v) for k, v in sorted(batch.repositories.items())]
        )
        await _send(conn, _STREAM_REPOSITORIES, sorted(batch.stream_repositories))
    if batch.people:
        await _send(conn, _PEOPLE, [(k, *v) for k, v in sorted(batch.people.items())])
    if batch.commits:
        commits = await _send_latest(conn, _COMMITS, batch.commits)
        if batch.parents:
            await _send(conn, _PARENTS, sorted(batch.parents))
        if batch.commit_branches:
            await _send(conn, _COMMIT_BRANCHES, sorted(batch.commit_branches))
    if batch.branches:
        branches = await _send_latest(conn, _LWW_BRANCH, batch.branches)
    if batch.files:
        files = await _send_latest(conn, _LWW_FILE, batch.files)
    if batch.runs:
        runs = await _send_runs(conn, batch)
    changes: list[tuple[str, str, str]] = []  # (event type, node type, node id)
    if repositories is not None:
        rows = await repositories.fetchall()
        changes += [("repository_node_added", "repository", r[0]) for r in rows if r[1]]
    if commits is not None:
        rows = await commits.fetchall()
        changes += [("commit_node_added", "commit", r[0]) for r in rows if r[1]]
    for cursor, node_type in ((branches, "branch"), (files, "file")):
        if cursor is not None:
            changes += [
                (
                    f"{node_type}_node_{'added' if r[3] else 'updated' if r[2] else 'removed'}",
                    node_type,
                    r[1],
                )
                for r in await cursor.fetchall()
            ]
    events = [_graph_event(graph, changes)] if changes else []
    if runs is not None:
        events += _stage_events(await runs.fetchall(), batch)
    return events


async def _send_latest(
    conn: AsyncConnection[Any], sql: str, table: Mapping[tuple[str, str], tuple[Any, ...]]
) -> AsyncCursor[Any]:
    return await _send(conn, sql, [(*key, *table[key]) for key in sorted(table)])


async def _send_runs(conn: AsyncConnection[Any], batch: GraphBatch) -> AsyncCursor[Any]:
    rows = [
        (
            *key,
            run_node_id(key),
            r.first_seen,
            r.started_at,
            r.status,
            *r.order,
            r.stream,
            r.completed_at,
            r.duration_ms,
            r.branch_name,
            r.commit_id,
            r.stages,
            r.clamped,
        )
        for key, r in sorted(batch.runs.items())
    ]
    return await _send(conn, _RUNS, rows)


def _stage_events(rows: list[tuple[Any, ...]], batch: GraphBatch) -> list[dict[str, Any]]:
    sent = {r.order[2] for r in batch.runs.values()}
    # A status change is the row now carrying one of this batch's events as its cause.
    return [
        pipeline_stage(
            pipeline_id=node_id,
            stage_id=str(run_id),
            stage_status=_STAGE[status],
            event_type="ci_pipeline_status_changed",
            timestamp=utc_timestamp(status_at),
            stage_name=str(pipeline_id),
            stage_order=None,
            payload={
                "object_type": "pipeline",
                "ci_provider": provider,
                "ci_pipeline_id": pipeline_id,
                "run_id": run_id,
                "to": status,
                "cause_event_id": cause,
            },
            source_module="ci",
        )
        for node_id, run_id, pipeline_id, provider, status, status_at, cause in rows
        if cause in sent
    ]


async def _send(
    conn: AsyncConnection[Any], sql: str, rows: Sequence[tuple[Any, ...]]
) -> AsyncCursor[Any]:
    return await conn.execute(sql.encode(), (orjson.dumps(rows).decode(),))


def _graph_event(graph: str, changes: list[tuple[str, str, str]]) -> dict[str, Any]:
    # One pass over a batch's changes (a thousand, on the event loop); then a few kinds.
    counts = _counts(kind for kind, _, _ in changes)
    added = sum(n for kind, n in counts.items() if kind.endswith("_added"))
    removed = sum(n for kind, n in counts.items() if kind.endswith("_removed"))
    first = changes[0]
    if len(changes) == 1:
        update: UpdateKind = "node_add" if added else "node_delete" if removed else "node_update"
        payload: dict[str, Any] = {"node_type": first[1], "node_id": first[2]}
        return graph_update(graph, update, first[0], payload, node_delta=added - removed)
    payload = {
        "changes": counts,
        "node_ids": [node_id for _, _, node_id in changes[:BULK_SAMPLE]],
        "node_ids_complete": len(changes) <= BULK_SAMPLE,
    }
    return graph_update(graph, "bulk", "team_nodes_changed", payload, node_delta=added - removed)


def _counts(kinds: Iterable[str]) -> dict[str, int]:
    return dict(Counter(kinds))  # counted in C


def emitted_rows(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    return [e["event_family"] for e in events], [orjson.dumps(e).decode() for e in events]

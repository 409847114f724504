"""What a team asks the PostgreSQL collector: events, a repository's graph, pipelines, streams.

Event pages are keyset pages on the append-only ``id``: each page is one index range scan
whatever the table's size, and the last page has no ``next`` (one row more than the page is
read to know whether another page exists). Ids are assigned when a row is inserted and
become visible at commit, so a row committed by a slower concurrent batch can appear below
a cursor already handed out; a reader that must see everything pages again from its last
complete ``next`` after the writers are idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

__all__ = [
    "EventQuery",
    "event_page",
    "pipelines",
    "purge_before",
    "repositories",
    "repository",
    "stats",
    "streams",
]

Pool = AsyncConnectionPool[AsyncConnection[Any]]
MAX_PAGE: Final = 10_000


@dataclass(frozen=True, slots=True)
class EventQuery:
    after: int = 0
    limit: int = 1000
    stream: str | None = None
    repository: str | None = None
    kind: str | None = None
    author: str | None = None
    since: datetime | None = None
    until: datetime | None = None


async def event_page(pool: Pool, query: EventQuery) -> dict[str, Any]:
    """``{"events": [...], "next": id}``; ``next`` is absent on the last page."""
    where = ["id > %s"]
    params: list[Any] = [query.after]
    for column, value in (("stream", query.stream), ("kind", query.kind), ("author", query.author)):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    if query.repository is not None:
        where.append("stream IN (SELECT stream FROM team_stream_repositories WHERE repo_url = %s)")
        params.append(query.repository)
    if query.since is not None:
        where.append("occurred_at >= %s")
        params.append(query.since)
    if query.until is not None:
        where.append("occurred_at < %s")
        params.append(query.until)
    # The clauses are this function's constants; every value is a parameter.
    columns = "id, stream, seq, source, event_id, kind, author, occurred_at, received_at, body"
    sql = f"SELECT {columns} FROM events WHERE {' AND '.join(where)} ORDER BY id LIMIT %s"  # noqa: S608
    params.append(query.limit + 1)
    async with pool.connection() as conn:
        cursor = await conn.execute(sql.encode(), params)
        rows = await cursor.fetchall()
    page = rows[: query.limit]
    events = [
        {
            "id": row[0],
            "stream": row[1],
            "seq": row[2],
            "source": row[3],
            "event_id": row[4],
            "kind": row[5],
            "author": row[6],
            "occurred_at": _iso(row[7]),
            "received_at": _iso(row[8]),
            "envelope": orjson.Fragment(row[9]),
        }
        for row in page
    ]
    answer: dict[str, Any] = {"events": events}
    if len(rows) > query.limit:
        answer["next"] = page[-1][0]
    return answer


async def repositories(pool: Pool) -> list[dict[str, Any]]:
    async with pool.connection() as conn:
        return await _all(
            conn, "SELECT repo_url, first_seen, last_seen FROM team_repositories ORDER BY repo_url"
        )


async def repository(pool: Pool, repo_url: str, *, recent: int = 50) -> dict[str, Any] | None:
    """Branches, the most recent commits and the most recently changed files of a repository."""
    async with pool.connection() as conn:
        found = await _all(
            conn,
            "SELECT repo_url, first_seen, last_seen FROM team_repositories WHERE repo_url = %s",
            repo_url,
        )
        if not found:
            return None
        branches = await _all(
            conn,
            "SELECT ref_name, head_commit, changed_at FROM team_branches"
            " WHERE repo_url = %s AND present ORDER BY ref_name",
            repo_url,
        )
        commits = await _all(
            conn,
            "SELECT c.commit_id, c.author, c.committed_at, c.message,"
            " coalesce((SELECT array_agg(parent ORDER BY position) FROM team_commit_parents p"
            "  WHERE p.repo_url = c.repo_url AND p.commit_id = c.commit_id), '{}') AS parents,"
            " coalesce((SELECT array_agg(ref_name ORDER BY ref_name) FROM team_commit_branches b"
            "  WHERE b.repo_url = c.repo_url AND b.commit_id = c.commit_id), '{}') AS branches"
            " FROM team_commits c WHERE c.repo_url = %s"
            " ORDER BY c.committed_at DESC, c.commit_id LIMIT %s",
            repo_url,
            recent,
        )
        files = await _all(
            conn,
            "SELECT f.path, f.modified_at AS last_modified, f.stream AS modified_by,"
            " f.change_type FROM team_files f"
            " JOIN team_stream_repositories r ON r.stream = f.stream"
            " WHERE r.repo_url = %s AND f.present"
            " ORDER BY f.modified_at DESC, f.path LIMIT %s",
            repo_url,
            recent,
        )
    return {**found[0], "branches": branches, "commits": commits, "files": files}


async def pipelines(pool: Pool, *, limit: int = 200) -> list[dict[str, Any]]:
    """Each pipeline run with its outcome and duration (the CI's own, else its clock's)."""
    async with pool.connection() as conn:
        return await _all(
            conn,
            "SELECT ci_provider, pipeline_id, run_id, node_id, status, status_at, started_at,"
            " completed_at, branch_name, commit_id, stages, stream,"
            " coalesce(duration_ms, (extract(epoch FROM completed_at - started_at) * 1000)::bigint)"
            "  AS duration_ms"
            " FROM team_pipeline_runs ORDER BY status_at DESC, run_id LIMIT %s",
            limit,
        )


async def streams(pool: Pool) -> list[dict[str, Any]]:
    """Each forwarding stream's last contact, counts and the backlog it last reported."""
    async with pool.connection() as conn:
        return await _all(
            conn,
            "SELECT stream, first_contact, last_contact, last_seq, batches, accepted,"
            " duplicates, backlog,"
            " (SELECT array_agg(repo_url ORDER BY repo_url) FROM team_stream_repositories r"
            "  WHERE r.stream = s.stream) AS repositories"
            " FROM streams s ORDER BY last_contact DESC, stream",
        )


async def stats(pool: Pool) -> dict[str, int]:
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT coalesce(sum(accepted), 0), coalesce(sum(batches), 0),"
            " coalesce(sum(duplicates), 0), count(*) FROM streams"
        )
        row = await cursor.fetchone()
    assert row is not None
    accepted, batches, duplicates, count = (int(v) for v in row)
    return {"accepted": accepted, "batches": batches, "duplicates": duplicates, "streams": count}


async def purge_before(pool: Pool, cutoff: datetime, *, chunk: int = 10_000) -> int:
    """Drop raw events that happened before ``cutoff``, in chunks, and older Idempotency-Key
    answers; the graph stays."""
    dropped = 0
    while True:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM events WHERE id IN"
                " (SELECT id FROM events WHERE occurred_at < %s ORDER BY id LIMIT %s)",
                (cutoff, chunk),
            )
            dropped += cursor.rowcount
            if cursor.rowcount < chunk:
                # Answers to Idempotency-Keys that old are past any forwarder's retry.
                await conn.execute("DELETE FROM idempotency WHERE at < %s", (cutoff,))
                return dropped


async def _all(conn: AsyncConnection[Any], sql: str, *params: Any) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql.encode(), params)
        return [{k: _plain(v) for k, v in row.items()} for row in await cursor.fetchall()]


def _plain(value: Any) -> Any:
    return _iso(value) if isinstance(value, datetime) else value


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")

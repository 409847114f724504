"""What a team asks the PostgreSQL collector: events, a repository's graph, pipelines, streams.

Event pages are keyset pages in commit order: rows are ordered by ``(txid, id)``, their
transaction's id then their own, and a page only reaches up to the oldest transaction still
in progress (``pg_snapshot_xmin`` of the statement's snapshot). Every transaction below that
horizon has ended, and any transaction that commits later has an id at or above it, so no
row can ever appear below a cursor already handed out; rows committed above a still running
batch wait for it to end. Each page is one index range scan whatever the table's size, and
the last page has no ``next`` (one row more than the page is read to know whether another
page exists). ``cursor`` is where to resume later, for a reader that follows new events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from mplp_lsp.collector.team_names import Naming

__all__ = [
    "Cursor",
    "EventQuery",
    "event_page",
    "page_statement",
    "pipelines",
    "purge_before",
    "repositories",
    "repository",
    "stats",
    "streams",
]

Pool = AsyncConnectionPool[AsyncConnection[Any]]
MAX_PAGE: Final = 10_000
_CURSOR: Final = re.compile(r"(\d{1,19})\.(\d{1,19})")


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """A place in the commit order: after the row ``id`` of transaction ``txid``."""

    txid: int = 0
    id: int = 0

    @classmethod
    def parse(cls, text: str) -> Cursor | None:
        """The cursor a page handed out (``"<txid>.<id>"``), or None if ``text`` is not one."""
        found = _CURSOR.fullmatch(text)
        return cls(int(found[1]), int(found[2])) if found else None

    def __str__(self) -> str:
        return f"{self.txid}.{self.id}"


@dataclass(frozen=True, slots=True)
class EventQuery:
    after: Cursor = Cursor()
    limit: int = 1000
    stream: str | None = None
    repository: str | None = None
    kind: str | None = None
    author: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def page_statement(query: EventQuery) -> tuple[bytes, list[Any]]:
    """The SELECT of one page (one row more than the page) and its parameters."""
    where = [
        "(txid, id) > (%s::text::xid8, %s)",
        "txid < pg_snapshot_xmin(pg_current_snapshot())",
    ]
    params: list[Any] = [str(query.after.txid), query.after.id]
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
    # The clauses are this function's constants; every value is a parameter. The output
    # names differ from the columns: ORDER BY a bare name would take the output column and
    # sort every row instead of reading the (txid, id) index in order.
    columns = (
        "txid::text::bigint AS page_txid, id, stream, seq, source, event_id, kind, author,"
        " occurred_at, received_at, body"
    )
    sql = (
        f"SELECT {columns} FROM events WHERE {' AND '.join(where)}"  # noqa: S608
        " ORDER BY txid, id LIMIT %s"
    )
    params.append(query.limit + 1)
    return sql.encode(), params


async def event_page(pool: Pool, query: EventQuery) -> dict[str, Any]:
    """``{"events": [...], "next": cursor, "cursor": cursor}``; ``next`` is absent on the
    last page, ``cursor`` (where this page ends) never."""
    sql, params = page_statement(query)
    async with pool.connection() as conn:
        cursor = await conn.execute(sql, params)
        rows = await cursor.fetchall()
    page = rows[: query.limit]
    events = [
        {
            "id": row[1],
            "stream": row[2],
            "seq": row[3],
            "source": row[4],
            "event_id": row[5],
            "kind": row[6],
            "author": row[7],
            "occurred_at": _iso(row[8]),
            "received_at": _iso(row[9]),
            "envelope": orjson.Fragment(row[10]),
        }
        for row in page
    ]
    end = Cursor(page[-1][0], page[-1][1]) if page else query.after
    answer: dict[str, Any] = {"events": events, "cursor": str(end)}
    if len(rows) > query.limit:
        answer["next"] = str(end)
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


async def streams(pool: Pool, naming: Naming) -> list[dict[str, Any]]:
    """Each forwarding stream's last contact, counts, the backlog it last reported (and
    when), what replaced it, its clock, and its machine and author as the team names them."""
    async with pool.connection() as conn:
        rows = await _all(
            conn,
            "SELECT stream, first_contact, last_contact, last_seq, batches, accepted,"
            " duplicates, replayed, backlog, backlog_oldest, backlog_reported_at, replaced_by,"
            " clock_ahead_ms, clamped, machine, s.author, p.name AS author_name,"
            " (SELECT array_agg(repo_url ORDER BY repo_url) FROM team_stream_repositories r"
            "  WHERE r.stream = s.stream) AS repositories"
            " FROM streams s LEFT JOIN team_people p ON p.author = s.author"
            " ORDER BY replaced_by IS NOT NULL, last_contact DESC, stream",
        )
    for row in rows:
        row["machine"] = naming.machine(row["machine"])
        row["author"] = naming.person(row["author"], row.pop("author_name"))
    return rows


async def stats(pool: Pool) -> dict[str, int]:
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT coalesce(sum(accepted), 0), coalesce(sum(batches), 0),"
            " coalesce(sum(duplicates), 0), coalesce(sum(replayed), 0), count(*),"
            " count(*) FILTER (WHERE replaced_by IS NULL) FROM streams"
        )
        row = await cursor.fetchone()
    assert row is not None
    accepted, batches, duplicates, replayed, count, live = (int(v) for v in row)
    return {
        "accepted": accepted,
        "batches": batches,
        "duplicates": duplicates,
        "replayed_batches": replayed,
        "streams": count,
        "live_streams": live,
    }


async def purge_before(pool: Pool, cutoff: datetime, *, chunk: int = 10_000) -> int:
    """Drop raw events received before ``cutoff``, in chunks, and older Idempotency-Key
    answers; the graph stays. By receive time, not the event's own: a workstation whose
    clock is behind keeps its events as long as everyone else's."""
    dropped = 0
    while True:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM events WHERE (txid, id) IN (SELECT txid, id FROM events"
                " WHERE received_at < %s LIMIT %s)",  # the BRIN index finds the old ranges
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
    """In UTC whatever the server's time zone (the collector sets no session zone)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")

"""What the team dashboard shows, read from the PostgreSQL collector (no aiohttp here).

Activity per repository and author over time, each repository's branches and recent
commits from the team graph, CI pipelines with run durations and success rates, the lead
time from a commit to the first successful pipeline run on it, and every forwarding
stream's last contact and backlog. Reuses :mod:`mplp_lsp.collector.pg_queries` where it
already answers the question.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from mplp_lsp.collector import pg_queries
from mplp_lsp.collector.pg_queries import Pool

RECENT: Final = 10
LEAD_TIMES: Final = 50
_STEPS: Final = {
    "hour": timedelta(days=2),
    "day": timedelta(days=90),
    "month": timedelta(days=3650),
}


async def team_view(pool: Pool, days: int) -> dict[str, Any]:
    since = datetime.now(UTC) - timedelta(days=days)
    step = next(name for name, span in _STEPS.items() if timedelta(days=days) <= span)
    repositories = await pg_queries.repositories(pool)
    graphs = [
        graph
        for repo in repositories
        if (graph := await pg_queries.repository(pool, repo["repo_url"], recent=RECENT))
    ]
    async with pool.connection() as conn:
        activity = await _rows(
            conn,
            "SELECT date_trunc(%s, e.occurred_at) AS at,"
            " coalesce(r.repo_url, '') AS repo_url, coalesce(e.author, '') AS author,"
            " count(*) AS events"
            " FROM events e LEFT JOIN team_stream_repositories r ON r.stream = e.stream"
            " WHERE e.occurred_at >= %s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            step,
            since,
        )
        pipelines = await _rows(
            conn,
            "SELECT ci_provider, pipeline_id, count(*) AS runs,"
            " count(*) FILTER (WHERE status = 'succeeded') AS succeeded,"
            " count(*) FILTER (WHERE status IN ('failed', 'cancelled')) AS failed,"
            " (avg(coalesce(duration_ms, extract(epoch FROM completed_at - started_at) * 1000))"
            "   FILTER (WHERE status IN ('succeeded', 'failed', 'cancelled')))::bigint"
            "   AS mean_duration_ms,"
            " max(status_at) AS last_run_at"
            " FROM team_pipeline_runs GROUP BY 1, 2 ORDER BY max(status_at) DESC",
        )
        # The first successful run on each commit; its end (else its last status) counts.
        lead = await _rows(
            conn,
            "SELECT c.repo_url, c.commit_id, c.committed_at,"
            " min(coalesce(p.completed_at, p.status_at)) AS first_success_at"
            " FROM team_commits c JOIN team_pipeline_runs p"
            "   ON p.commit_id = c.commit_id AND p.status = 'succeeded'"
            " GROUP BY 1, 2, 3 ORDER BY c.committed_at DESC LIMIT %s",
            LEAD_TIMES,
        )
    for row in pipelines:
        finished = row["succeeded"] + row["failed"]
        row["success_rate"] = round(row["succeeded"] / finished, 3) if finished else None
    for row in lead:
        row["lead_time_s"] = max(
            0.0, (row["first_success_at"] - row["committed_at"]).total_seconds()
        )
    lead_times = [row["lead_time_s"] for row in lead]
    return {
        "since": _iso(since),
        "step": step,
        "activity": [{**row, "at": _iso(row["at"])} for row in activity],
        "repositories": graphs,
        "pipelines": [{**row, "last_run_at": _iso(row["last_run_at"])} for row in pipelines],
        "runs": await pg_queries.pipelines(pool, limit=RECENT * 2),
        "lead_times": [
            {
                **row,
                "committed_at": _iso(row["committed_at"]),
                "first_success_at": _iso(row["first_success_at"]),
            }
            for row in lead
        ],
        "median_lead_time_s": statistics.median(lead_times) if lead_times else None,
        "streams": await pg_queries.streams(pool),
    }


async def _rows(conn: Any, sql: str, *params: Any) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql.encode(), params)
        return list(await cursor.fetchall())


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")

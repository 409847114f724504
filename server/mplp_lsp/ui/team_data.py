"""What the team dashboard shows, read from the PostgreSQL collector (no aiohttp here).

Activity per repository and person over time: what people and their tools did (tool, file,
git and CI events); the runtimes' own derived events (``graph_update``, ``pipeline_stage``,
``runtime_execution``) are not activity. A file event carries no author, so it counts for
the author its workstation is configured with (the stream's report). Each repository's
branches and recent commits from the team graph, CI pipelines with run durations and success
rates, the four DORA keys per repository (:mod:`mplp_lsp.ui.dora`), the time from a commit
to the first successful pipeline run on it, and every forwarding stream. People and
machines are named as the team chose (:class:`~mplp_lsp.collector.team_names.Naming`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from mplp_lsp.collector import pg_queries
from mplp_lsp.collector.pg_queries import Pool
from mplp_lsp.collector.team_graph import CLOCK_AHEAD_BOUND
from mplp_lsp.collector.team_names import Naming
from mplp_lsp.protocol.kinds import PAYLOAD_KINDS
from mplp_lsp.ui import dora

RECENT: Final = 10
LEAD_TIMES: Final = 50
# Deployments and commits this long before the period are read too: a period's first
# deployment is compared with the one before it, its outage may have started before it.
LOOK_BACK: Final = timedelta(days=90)
_STEPS: Final = {
    "hour": timedelta(days=2),
    "day": timedelta(days=90),
    "month": timedelta(days=3650),
}
ACTIVITY_KINDS: Final = tuple(kind.value for kind in PAYLOAD_KINDS)


@dataclass(frozen=True, slots=True)
class TeamOptions:
    naming: Naming = field(default_factory=Naming)
    deploy_pipelines: tuple[str, ...] = ("*deploy*", "*release*")


async def team_view(pool: Pool, days: int, options: TeamOptions) -> dict[str, Any]:
    until = datetime.now(UTC)
    since = until - timedelta(days=days)
    step = next(name for name, span in _STEPS.items() if timedelta(days=days) <= span)
    naming = options.naming
    repositories = await pg_queries.repositories(pool)
    graphs = [
        graph
        for repo in repositories
        if (graph := await pg_queries.repository(pool, repo["repo_url"], recent=RECENT))
    ]
    async with pool.connection() as conn:
        people = {
            row["author"]: row["name"]
            for row in await _rows(conn, "SELECT author, name FROM team_people")
        }
        # A time ahead of its receipt by more than the bound is a wrong clock: counted when
        # it was received, as the team graph clamps it.
        activity = await _rows(
            conn,
            "SELECT date_trunc(%s, least(e.occurred_at, e.received_at + %s), 'UTC') AS at,"
            " coalesce(r.repo_url, '') AS repo_url, coalesce(e.author, s.author) AS author,"
            " count(*) AS events"
            " FROM events e LEFT JOIN team_stream_repositories r ON r.stream = e.stream"
            " LEFT JOIN streams s ON s.stream = e.stream"
            " WHERE e.occurred_at >= %s AND e.kind = ANY(%s)"
            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            step,
            CLOCK_AHEAD_BOUND,
            since,
            list(ACTIVITY_KINDS),
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
        delivery = await _delivery(conn, options, since, until)
    for row in pipelines:
        finished = row["succeeded"] + row["failed"]
        row["success_rate"] = round(row["succeeded"] / finished, 3) if finished else None
    for row in lead:
        row["lead_time_s"] = max(
            0.0, (row["first_success_at"] - row["committed_at"]).total_seconds()
        )
    for graph in graphs:
        for commit in graph["commits"]:
            commit["author"] = naming.person(commit["author"], people.get(commit["author"]))
    lead_times = [row["lead_time_s"] for row in lead]
    return {
        "since": _iso(since),
        "step": step,
        "names": naming.mode,
        "activity": [
            {
                **row,
                "at": _iso(row["at"]),
                "author": naming.person(row["author"], people.get(row["author"])),
            }
            for row in activity
        ],
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
        "delivery": delivery,
        "streams": await pg_queries.streams(pool, naming),
    }


async def _delivery(
    conn: Any, options: TeamOptions, since: datetime, until: datetime
) -> dict[str, Any]:
    """The DORA keys of every repository with deployment pipeline runs in the period."""
    known = await _rows(conn, "SELECT DISTINCT ci_provider, pipeline_id FROM team_pipeline_runs")
    chosen = [
        f"{row['ci_provider']}/{row['pipeline_id']}"
        for row in known
        if dora.is_deployment_pipeline(row["pipeline_id"], options.deploy_pipelines)
    ]
    rows = await _rows(
        conn,
        "SELECT r.ci_provider || '/' || r.pipeline_id AS pipeline, r.run_id, r.status,"
        " coalesce(r.completed_at, r.status_at) AS finished_at, r.commit_id,"
        " (SELECT min(c.repo_url) FROM team_commits c WHERE c.commit_id = r.commit_id)"
        "  AS repo_url"
        " FROM team_pipeline_runs r"
        " WHERE r.ci_provider || '/' || r.pipeline_id = ANY(%s)"
        "  AND r.status IN ('succeeded', 'failed', 'cancelled')"
        "  AND coalesce(r.completed_at, r.status_at) >= %s"
        "  AND coalesce(r.completed_at, r.status_at) < %s",
        chosen,
        since - LOOK_BACK,
        until,
    )
    runs: dict[str, list[dora.Run]] = defaultdict(list)
    for row in rows:
        if row["repo_url"] is not None:
            runs[row["repo_url"]].append(
                dora.Run(
                    row["pipeline"],
                    row["run_id"],
                    row["status"],
                    row["finished_at"],
                    row["commit_id"],
                )
            )
    repositories = []
    for repo_url in sorted(runs):
        if not any(since <= run.finished_at < until for run in runs[repo_url]):
            continue
        commits = await _commits(conn, repo_url, since - LOOK_BACK)
        figures = dora.keys(runs[repo_url], commits, since, until)
        repositories.append({"repo_url": repo_url, **figures})
    return {
        "deploy_pipelines": list(options.deploy_pipelines),
        "pipelines": sorted(chosen),
        "repositories": repositories,
    }


async def _commits(conn: Any, repo_url: str, since: datetime) -> dict[str, dora.Commit]:
    rows = await _rows(
        conn,
        "SELECT c.commit_id, c.committed_at,"
        " coalesce((SELECT array_agg(parent ORDER BY position) FROM team_commit_parents p"
        "  WHERE p.repo_url = c.repo_url AND p.commit_id = c.commit_id), '{}') AS parents"
        " FROM team_commits c WHERE c.repo_url = %s AND c.committed_at >= %s",
        repo_url,
        since,
    )
    return {
        row["commit_id"]: dora.Commit(row["committed_at"], tuple(row["parents"])) for row in rows
    }


async def _rows(conn: Any, sql: str, *params: Any) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql.encode(), params)
        return list(await cursor.fetchall())


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")

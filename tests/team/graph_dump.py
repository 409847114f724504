"""The team graph's rows in a canonical order: equal dumps mean an identical graph."""

from __future__ import annotations

import psycopg

GRAPH_TABLES = (
    "team_repositories",
    "team_stream_repositories",
    "team_branches",
    "team_commits",
    "team_commit_parents",
    "team_commit_branches",
    "team_files",
    "team_pipeline_runs",
)


def dump(conninfo: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(conninfo) as conn:
        return {
            table: sorted(conn.execute(f"SELECT * FROM {table}".encode()).fetchall(), key=repr)
            for table in GRAPH_TABLES
        }


def clear(conninfo: str) -> None:
    with psycopg.connect(conninfo) as conn:
        conn.execute(
            f"TRUNCATE events, streams, idempotency, team_emitted, {', '.join(GRAPH_TABLES)}".encode()
        )

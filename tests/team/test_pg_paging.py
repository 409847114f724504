"""Event pages against two real collector instances writing at once on a real PostgreSQL.

A batch's row ids are drawn at INSERT and become visible at COMMIT. Here one writer's batch
is held inside its transaction (its stream's row is locked by another session, so the batch
waits after inserting its events) while the other instance commits a later batch; a reader
pages in between, then again from its cursor once the slow batch committed. It must see
every envelope exactly once: nothing may commit below a cursor already handed out.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mplp_lsp.collector.pg_queries import EventQuery, page_statement
from mplp_lsp.collector.pg_schema import migrate
from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.support.team import batch, envelope, get, post
from tests.team.conftest import start_collector


def files(prefix: str, count: int) -> list[dict[str, Any]]:
    return [
        envelope(Kind.FILE_UPDATE, "file_update", file_path=f"{prefix}{i}") for i in range(count)
    ]


async def read_pages(url: str, after: str) -> tuple[list[str], str]:
    """Every event id from ``after`` to the last page, and the cursor to resume from."""
    seen: list[str] = []
    while True:
        status, page = await get(url, f"/events?limit=7&after={after}")
        assert status == 200, page
        seen += [e["event_id"] for e in page["events"]]
        after = page["cursor"]
        if "next" not in page:
            return seen, after
        assert page["next"] == page["cursor"]


def waiting_writers(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND application_name = 'mplp-lsp collector'"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_batch_committing_late_is_not_skipped_by_a_reader(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    slow_writer = start_collector(pg_url, pg_cluster, tmp_path)
    fast_writer = start_collector(pg_url, pg_cluster, tmp_path)
    conninfo = pg_cluster.psql_url(pg_url.rsplit("/", 1)[1])
    try:
        first, held, late = files("a", 10), files("b", 10), files("c", 10)
        assert (await post(slow_writer.url, batch("slow", first)))[0] == 200
        with psycopg.connect(conninfo) as locker:
            # The slow stream's row stays locked: its next batch inserts its events, then
            # waits for this session inside its transaction.
            locker.execute("SELECT 1 FROM streams WHERE stream = 'slow' FOR UPDATE")
            slow = asyncio.ensure_future(post(slow_writer.url, batch("slow", held, 11)))
            deadline = time.monotonic() + 60
            while waiting_writers(conninfo) == 0:
                assert time.monotonic() < deadline and not slow.done(), "the batch never waited"
                await asyncio.sleep(0.05)
            # The other instance commits a batch drawn after the held one's ids.
            assert (await post(fast_writer.url, batch("fast", late)))[0] == 200
            before, cursor = await read_pages(fast_writer.url, "0.0")
            locker.rollback()
        assert (await slow)[0] == 200
        after, _ = await read_pages(fast_writer.url, cursor)
        everything = [e["event_id"] for e in first + held + late]
        assert sorted(before + after) == sorted(everything)
        assert set(before) >= {e["event_id"] for e in first}
        # Rows committed above the batch still in progress waited for it.
        assert not set(before) & {e["event_id"] for e in held + late}
    finally:
        slow_writer.stop()
        fast_writer.stop()


@pytest.mark.parametrize(
    "query",
    [EventQuery(), EventQuery(stream="s"), EventQuery(kind="git"), EventQuery(author="a")],
    ids=["all", "stream", "kind", "author"],
)
async def test_a_page_reads_an_index_in_order_instead_of_sorting(
    pg_cluster: postgres.Cluster, pg_url: str, query: EventQuery
) -> None:
    """Each page costs one index range scan whatever the table's size: no Sort node (a Sort
    would read every row after the cursor)."""
    async with await psycopg.AsyncConnection.connect(
        pg_url, password=postgres.PASSWORD, autocommit=True
    ) as conn:
        await migrate(conn)
        # An empty table would be scanned whole; the plan wanted is the one for a big one.
        await conn.execute("SET enable_seqscan = off")
        await conn.execute("SET enable_bitmapscan = off")
        sql, params = page_statement(query)
        cursor = await conn.execute(b"EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in await cursor.fetchall())
    assert "Index Scan" in plan and "Sort" not in plan, plan

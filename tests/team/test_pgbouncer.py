"""The team collector behind a real PgBouncer in transaction pooling mode, and its pool size.

Debian's PgBouncer shares 4 server connections among every client; consecutive
transactions of one client connection run on different server connections. Two collector
instances take 40 batches at once through it (each batch writes events, the graph in
pipeline mode and its stream): every one must succeed, with nothing left of one
transaction's session (a prepared statement, a temp table, a setting) expected by the next.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mplp_lsp.protocol.kinds import Kind
from tests import pgbouncer, postgres
from tests.required import unavailable
from tests.support.team import batch, count, envelope, get, post
from tests.team.conftest import start_collector

pytestmark = pytest.mark.e2e

BATCHES = 40
PER_BATCH = 50


@pytest.fixture
def bouncer(pg_cluster: postgres.Cluster) -> Iterator[pgbouncer.Bouncer]:
    program = pgbouncer.binary()
    if program is None:
        unavailable("PgBouncer is not installed (apt-get install pgbouncer)")
    started = pgbouncer.start(program, pg_cluster)
    yield started
    started.stop()


def workload(stream: int) -> bytes:
    """A workstation's batch: file saves, a commit on its branch, a CI run."""
    items = [
        envelope(Kind.FILE_UPDATE, "file_update", file_path=f"src/s{stream}/f{n}.py")
        for n in range(PER_BATCH - 2)
    ]
    items.append(envelope(Kind.GIT, "git", commit_id=f"{stream:040x}", event_kind="commit"))
    items.append(envelope(Kind.CI, "ci", run_id=f"run-{stream}"))
    return batch(f"workstation-{stream}", items)


async def test_forty_batches_at_once_through_pgbouncer_in_transaction_mode(
    pg_cluster: postgres.Cluster, pg_url: str, bouncer: pgbouncer.Bouncer, tmp_path: Path
) -> None:
    through = bouncer.url_for(pg_url.rsplit("/", 1)[1])
    instances = [start_collector(through, pg_cluster, tmp_path) for _ in range(2)]
    try:
        bodies = [workload(n) for n in range(BATCHES)]
        answers = await asyncio.gather(
            *(post(instances[n % 2].url, body) for n, body in enumerate(bodies))
        )
        assert [status for status, _ in answers] == [200] * BATCHES, answers
        assert sum(a["accepted"] for _, a in answers) == BATCHES * PER_BATCH
        # Reads through the bouncer too: paging (snapshot functions) and the graph.
        status, page = await get(instances[1].url, "/events?limit=10000")
        assert status == 200 and len(page["events"]) == BATCHES * PER_BATCH
        status, streams = await get(instances[0].url, "/streams")
        assert status == 200 and len(streams["streams"]) == BATCHES
    finally:
        for instance in instances:
            instance.stop()
    assert count(pg_cluster, pg_url, "SELECT count(*) FROM events") == BATCHES * PER_BATCH
    assert count(pg_cluster, pg_url, "SELECT count(*) FROM team_commits") == BATCHES
    for instance in instances:
        assert instance.process.stderr is not None
        logged = instance.process.stderr.read()
        assert "database error" not in logged and "Traceback" not in logged, logged


async def test_an_instance_opens_at_most_its_pool_size_and_a_probe(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    conninfo = pg_cluster.psql_url(pg_url.rsplit("/", 1)[1])
    collector = start_collector(pg_url, pg_cluster, tmp_path, "--db-pool-size", "2")
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE application_name = 'mplp-lsp collector'"
                ).fetchone()
                seen.append(int(row[0]) if row else 0)
                time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        answers = await asyncio.gather(*(post(collector.url, workload(n)) for n in range(20)))
        assert [status for status, _ in answers] == [200] * 20
    finally:
        stop.set()
        watcher.join()
        collector.stop()
    assert max(seen) == 2 + 1, seen  # the pool's two, and the readiness probe's own

"""A full disk under the team collector's PostgreSQL: 507 and one log line per episode.

The database lives in a tablespace on a small real tmpfs; the test fills it to the last
byte. Every batch is then refused with 507 ``storage_full`` (the SQLite collector's answer:
a forwarder keeps the batch and retries), the instance logs the episode once, and once
there is space again the next batch is stored and the end of the episode is logged.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import psycopg
import pytest

from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.support.team import batch, envelope, post
from tests.team.conftest import start_collector

pytestmark = pytest.mark.e2e


async def test_a_full_disk_is_507_with_one_log_line_per_episode(
    pg_cluster: postgres.Cluster, tmp_path: Path
) -> None:
    from tests.support.disk import fill, tmpfs

    # Not under tmp_path: the server (nobody) must reach the tablespace's directory.
    reachable = Path(tempfile.mkdtemp(prefix="mplp-pg-full-"))
    reachable.chmod(0o755)
    with tmpfs(reachable / "small", "48m") as small:
        space = small / "tablespace"
        space.mkdir()
        if os.geteuid() == 0:
            os.chown(space, 65534, 65534)  # the cluster's server runs as nobody
        with psycopg.connect(pg_cluster.psql_url(), autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE small LOCATION '{space}'".encode())
            conn.execute(b"CREATE DATABASE on_small TABLESPACE small")
        url = pg_cluster.url_for("on_small")
        collector = start_collector(url, pg_cluster, tmp_path)
        try:
            first = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"a{n}") for n in range(5)]
            assert (await post(collector.url, batch("ws", first)))[0] == 200
            filler = fill(small)
            refused = []
            for n in range(5):
                many = [
                    envelope(Kind.FILE_UPDATE, "file_update", file_path=f"b{n}-{i}-" + "y" * 200)
                    for i in range(1000)
                ]
                refused.append(await post(collector.url, batch("ws", many, 100 + 1000 * n)))
            assert [(status, answer["error"]) for status, answer in refused] == [
                (507, "storage_full")
            ] * 5
            filler.unlink()
            again = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"c{n}") for n in range(5)]
            assert (await post(collector.url, batch("ws", again, 10_000)))[0] == 200
        finally:
            collector.stop()
            with psycopg.connect(pg_cluster.psql_url(), autocommit=True) as conn:
                conn.execute(b"DROP DATABASE IF EXISTS on_small")
                conn.execute(b"DROP TABLESPACE IF EXISTS small")
    reachable.joinpath("small").rmdir()
    reachable.rmdir()
    assert collector.process.stderr is not None
    logged = collector.process.stderr.read()
    lines = [line for line in logged.splitlines() if ": the disk " in line]
    assert len(lines) == 2 and "disk is full" in lines[0] and "space again" in lines[1], logged
    assert "Traceback" not in logged and "database error" not in logged

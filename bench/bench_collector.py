"""The team collector on PostgreSQL, each figure beside its peer measured in the same run.

Run: python bench/bench_collector.py [--size N] [--prefill M] [--page-rows R]

Needs PostgreSQL's server binaries (Debian's ``postgresql``) and the ``postgres`` extra; a
throwaway cluster is started in a temp dir (fsync on, as in production).

* drain: N envelopes (file saves, commits, CI runs from 8 workstations) POSTed as the
  forwarders send them: batches of 1000, each stream one batch at a time, the 8 streams at
  once, until every batch is acknowledged (committed), into ``collector serve --db
  postgresql://`` with the team graph on: one instance, then two instances on one database
  (streams alternate between them). Target >= 30,000 envelopes/s. Peers in the same run:
  ``COPY`` of the same rows into the same ``events`` table (the physical bound; target
  >= 0.3x) and the SQLite collector (``--db FILE``) given the same batches.
* grown: the same N envelopes into a database already holding M stored envelopes (rows
  from generate_series), one instance, between two drains into empty databases (the
  machine's load moves between minutes); target within 20 % of the empty databases' mean
  rate (all printed).
* paging: ``GET /events?limit=1000`` over the last R rows of that database, page after
  page until a page has no ``next``; every page's latency. Target: each page < 50 ms, and
  the last page ends.

--size defaults to 100,000, --prefill to 10,000,000 (several minutes and ~8 GB of disk),
--page-rows to 1,000,000; use e.g. ``--size 20000 --prefill 1000000 --page-rows 200000``
for a quick run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import orjson  # noqa: E402
import psycopg  # noqa: E402
from tests import postgres  # noqa: E402

from mplp_lsp.collector.team_graph import author_hash  # noqa: E402
from mplp_lsp.protocol.envelope import build_envelope, new_id  # noqa: E402
from mplp_lsp.protocol.kinds import KIND_BY_EVENT_TYPE, Kind  # noqa: E402

TOKEN = "bench-token"
BATCH = 1000
STREAMS = 8
START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def workload(size: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """Per stream, its envelopes in order: 90 % file saves, 8 % commits, 2 % CI updates."""
    streams: list[tuple[str, list[dict[str, Any]]]] = [(new_id(), []) for _ in range(STREAMS)]
    for n in range(size):
        stream = n % STREAMS
        when = START + timedelta(milliseconds=n)
        kind_pick = n % 50
        if kind_pick < 4:
            payload: dict[str, Any] = {
                "repo_url": f"https://git.example.org/team/repo{stream}.git",
                "commit_id": f"{n:040x}",
                "ref_name": "refs/heads/main",
                "event_kind": "commit",
                "author_name": f"Dev {stream}",
                "author_email": f"dev{stream}@example.org",
                "commit_message": f"change {n}",
                "timestamp": stamp(when),
                "parent_commits": [f"{n - STREAMS * 50:040x}"] if n >= STREAMS * 50 else [],
            }
            kind = Kind.GIT
        elif kind_pick == 4:
            payload = {
                "ci_provider": "gitlab-ci",
                "pipeline_id": f"build-{stream}",
                "run_id": str(n // 400),
                "status": "running" if n % 100 < 50 else "succeeded",
                "started_at": stamp(when),
                "stages": [{"stage_name": "test", "status": "running"}],
            }
            kind = Kind.CI
        else:
            payload = {
                "file_path": f"src/module_{n % 997}/file_{n % 89}.py",
                "change_type": "modified",
                "timestamp": stamp(when),
                "lines_added": n % 7,
                "lines_removed": n % 3,
                "language": "python",
            }
            kind = Kind.FILE_UPDATE
        streams[stream][1].append(
            build_envelope(kind, payload, source_module="bench", timestamp=stamp(when))
        )
    return streams


def bodies(streams: list[tuple[str, list[dict[str, Any]]]]) -> list[list[bytes]]:
    out = []
    for stream, envelopes in streams:
        out.append(
            [
                json.dumps(
                    {
                        "source": stream,
                        "items": [
                            {"seq": start + i + 1, "envelope": e}
                            for i, e in enumerate(envelopes[start : start + BATCH])
                        ],
                    },
                    separators=(",", ":"),
                ).encode()
                for start in range(0, len(envelopes), BATCH)
            ]
        )
    return out


def start_collector(db: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "mplp_lsp", "collector", "serve", "--port", "0", "--db", db],
        env={**env, "MPLP_LSP_COLLECTOR_TOKEN": TOKEN, "PYTHONPATH": str(ROOT / "server")},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    while line := process.stderr.readline():
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            return process, found.group(1)
    raise RuntimeError(f"collector did not start: {process.stderr.read()}")


async def drain(urls: list[str], per_stream: list[list[bytes]]) -> float:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:

        async def forward(url: str, batches: list[bytes]) -> None:
            for body in batches:
                async with session.post(f"{url}/events", data=body) as response:
                    if response.status != 200:
                        raise RuntimeError(f"{response.status}: {await response.text()}")
                    await response.read()

        began = time.perf_counter()
        await asyncio.gather(
            *(forward(urls[i % len(urls)], batches) for i, batches in enumerate(per_stream))
        )
        return time.perf_counter() - began


def run_drain(dbs: list[str], env: dict[str, str], per_stream: list[list[bytes]]) -> float:
    started = [start_collector(db, env) for db in dbs]
    try:
        return asyncio.run(drain([url for _, url in started], per_stream))
    finally:
        for process, _ in started:
            process.terminate()
            process.wait()


def copy_rows(conninfo: str, streams: list[tuple[str, list[dict[str, Any]]]]) -> float:
    """COPY the rows the collector would store, into the same table, one transaction."""
    rows = []
    for stream, envelopes in streams:
        for seq, e in enumerate(envelopes, start=1):
            email = e["payload"].get("author_email")
            rows.append(
                (
                    stream,
                    seq,
                    e["source"],
                    e["event_id"],
                    KIND_BY_EVENT_TYPE[e["event_type"]].value,
                    author_hash(email) if email else None,
                    e["timestamp"],
                    json.dumps(e, separators=(",", ":")),
                )
            )
    with psycopg.connect(conninfo) as conn:
        began = time.perf_counter()
        with conn.cursor().copy(
            "COPY events (stream, seq, source, event_id, kind, author, occurred_at, body)"
            " FROM STDIN"
        ) as copy:
            for row in rows:
                copy.write_row(row)
        conn.commit()
        return time.perf_counter() - began


def migrate(url: str, env: dict[str, str]) -> None:
    process, _ = start_collector(url, env)
    process.terminate()
    process.wait()


def prefill(conninfo: str, rows: int) -> float:
    body = json.dumps(
        build_envelope(
            Kind.FILE_UPDATE,
            {"file_path": "src/x.py", "change_type": "modified", "timestamp": stamp(START)},
            source_module="bench",
        )
    )
    began = time.perf_counter()
    step = 1_000_000
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for first in range(0, rows, step):
            conn.execute(
                "INSERT INTO events (stream, seq, source, event_id, kind, occurred_at, body)"
                " SELECT 'prefill-' || (g %% 8), g, 'mplp-lsp/bench', gen_random_uuid()::text,"
                " 'file_update', timestamptz '2025-01-01' + g * interval '1 ms', %s"
                " FROM generate_series(%s::bigint, %s::bigint) AS g",
                (body, first + 1, min(rows, first + step)),
            )
        conn.execute("VACUUM ANALYZE events")
    return time.perf_counter() - began


async def paging(url: str, after: str) -> tuple[list[float], int, bool]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    times: list[float] = []
    rows = 0
    async with aiohttp.ClientSession(headers=headers) as session:
        while True:
            began = time.perf_counter()
            async with session.get(f"{url}/events", params={"after": after, "limit": 1000}) as r:
                page = orjson.loads(await r.read())
            times.append(time.perf_counter() - began)
            rows += len(page["events"])
            if "next" not in page:
                return times, rows, True
            if page["next"] == after:
                return times, rows, False
            after = page["next"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--prefill", type=int, default=10_000_000)
    parser.add_argument("--page-rows", type=int, default=1_000_000)
    args = parser.parse_args()
    bin_dir = postgres.binaries()
    if bin_dir is None:
        sys.exit("PostgreSQL's server binaries are not installed (apt-get install postgresql)")
    cluster = postgres.start(bin_dir, settings={"max_wal_size": "8GB"})
    work = Path(tempfile.mkdtemp(prefix="bench-collector-"))
    env = cluster.env()
    try:
        streams = workload(args.size)
        per_stream = bodies(streams)
        size = args.size
        print(f"drain ({size:,} envelopes, batches of {BATCH}, {STREAMS} streams at once)")
        one = run_drain([cluster.create_database("one")], env, per_stream)
        two_db = cluster.create_database("two")
        two = run_drain([two_db, two_db], env, per_stream)
        copy_db = cluster.create_database("copy")
        migrate(copy_db, env)
        copied = copy_rows(cluster.psql_url("copy"), streams)
        sqlite = run_drain([str(work / "collector.db")], env, per_stream)
        best = max(size / one, size / two)
        print(
            f"  PostgreSQL, 1 instance, team graph on {size / one:>10,.0f} /s  (target >= 30,000/s)"
        )
        print(f"  PostgreSQL, 2 instances, team graph on{size / two:>10,.0f} /s")
        print(
            f"  COPY of the same rows (peer)           {size / copied:>10,.0f} /s  -> best = {best / (size / copied):.2f}x (target >= 0.3x)"
        )
        print(f"  SQLite collector (peer)                {size / sqlite:>10,.0f} /s")
        with psycopg.connect(cluster.psql_url("two")) as conn:
            stored = conn.execute(
                "SELECT count(*), count(DISTINCT event_id) FROM events"
            ).fetchone()
        print(f"  stored after two instances: {stored[0]:,} rows, {stored[1]:,} distinct")

        if args.prefill:
            big = cluster.create_database("big")
            migrate(big, env)
            took = prefill(cluster.psql_url("big"), args.prefill)
            print(
                f"grown ({args.prefill:,} envelopes prefilled by INSERT ... generate_series in {took:.0f} s)"
            )
            # An empty database right before and right after: the machine's load moves
            # between minutes, so the grown rate is compared with its neighbours.
            before = run_drain([cluster.create_database("empty_before")], env, per_stream)
            grown = run_drain([big], env, per_stream)
            after = run_drain([cluster.create_database("empty_after")], env, per_stream)
            empty_rate = (size / before + size / after) / 2
            print(
                f"  into an empty database, 1 instance     {size / before:>10,.0f} /s before, {size / after:,.0f} /s after"
            )
            print(
                f"  into {args.prefill:>11,} stored, 1 instance {size / grown:>10,.0f} /s  = {size / grown / empty_rate:.2f}x the empty rate (target >= 0.8x)"
            )
            process, url = start_collector(big, env)
            try:
                with psycopg.connect(cluster.psql_url("big")) as conn:
                    start = conn.execute(
                        "SELECT txid::text || '.' || id FROM events"
                        " ORDER BY txid DESC, id DESC OFFSET %s LIMIT 1",
                        (args.page_rows,),
                    ).fetchone()
                times, rows, ended = asyncio.run(paging(url, start[0] if start else "0.0"))
            finally:
                process.terminate()
                process.wait()
            times.sort()
            print(
                f"paging (GET /events?limit=1000 over the last {rows:,} rows, {len(times)} pages)"
            )
            print(
                f"  per page: median {times[len(times) // 2] * 1000:.1f} ms,"
                f" p99 {times[int(len(times) * 0.99)] * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms"
                f" (target < 50 ms); last page ends: {'yes' if ended else 'NO'}"
            )
            slow = sum(t >= 0.05 for t in times)
            print(f"  pages at or over 50 ms: {slow} of {len(times)}")
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()

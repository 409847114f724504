"""The team collector on PostgreSQL, each figure beside its peer measured in the same run.

Run from the repository root: python bench/bench_collector.py [--quick] [--size N] [--prefill M]
[--page-rows R]

Needs PostgreSQL's server binaries (Debian's ``postgresql``; without them it says so and exits
77) and the ``postgres`` extra; a throwaway cluster is started in a temp dir (fsync on, as in
production).

* drain: N envelopes (file saves, commits, CI runs from 8 workstations) POSTed as the
  forwarders send them: batches of 1000, each stream one batch at a time, the 8 streams at
  once, until every batch is acknowledged (committed), into ``collector serve --db
  postgresql://`` with the team graph on: one instance, then two instances on one database
  (streams alternate between them). Target >= 30,000 envelopes/s. Peers in the same run:
  ``COPY`` of the same rows into the same ``events`` table (the physical bound; target
  >= 0.3x) and the SQLite collector (``--db FILE``) given the same batches. Beside each
  rate, the CPU time the collectors and PostgreSQL used per envelope (microseconds, from
  /proc): on a shared machine the rate follows its load, the CPU time much less.
* grown: the same N envelopes into a database already holding M stored envelopes (rows
  from generate_series), one instance, between two drains into empty databases (the
  machine's load moves between minutes); target within 20 % of the empty databases' mean
  rate (all printed).
* paging: ``GET /events?limit=1000`` over the last R rows of that database, page after
  page until a page has no ``next``; every page's latency (median, p99, max). Target: each
  page < 50 ms, and the last page ends. Peer: ``GET /health`` timed right after each page,
  the tail any request has on the machine at that moment.

--size defaults to 100,000, --prefill to 10,000,000 (several minutes and ~8 GB of disk),
--page-rows to 1,000,000; ``--size 20000 --prefill 1000000 --page-rows 200000`` is a run of
a few minutes whose figures still mean something (--quick only checks that it all works).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import psycopg

from benchlib.harness import Bench, load_average
from mplp_lsp.collector.team_graph import author_hash
from mplp_lsp.protocol.envelope import build_envelope, new_id
from mplp_lsp.protocol.kinds import KIND_BY_EVENT_TYPE, Kind

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
        env={**env, "MPLP_LSP_COLLECTOR_TOKEN": TOKEN},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    while line := process.stderr.readline():
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            wait_ready(found.group(1))
            return process, found.group(1)
    raise RuntimeError(f"collector did not start: {process.stderr.read()}")


def wait_ready(url: str) -> None:
    """Until ``/ready`` says the database is migrated and takes writes, as a balancer waits
    (a PostgreSQL collector listens before it has reached its database)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/ready", timeout=5):
                return
        except OSError:  # 503 (HTTPError) or no answer yet
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the collector at {url} did not get ready")


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


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """CPU time a process used (Linux /proc), with its reaped children's if asked."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu(root: int) -> float:
    """PostgreSQL's CPU so far: every live process under ``root`` and what its postmaster
    reaped (a backend's time counts there once its connection closes)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    tree, frontier = set(), {root}
    while frontier:
        tree |= frontier
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
    return sum(cpu_seconds(pid, children=True) for pid in tree)


@dataclass
class Drain:
    seconds: float
    collector_cpu: float  # all instances together
    server_cpu: float

    def rate(self, size: int) -> float:
        return size / self.seconds

    def cpu(self, size: int) -> str:
        per = 1_000_000 / size
        return (
            f"CPU per envelope: collector {self.collector_cpu * per:.1f} us,"
            f" PostgreSQL {self.server_cpu * per:.1f} us"
        )


def run_drain(
    dbs: list[str], env: dict[str, str], per_stream: list[list[bytes]], server: int
) -> Drain:
    started = [start_collector(db, env) for db in dbs]
    try:
        collector_before = sum(cpu_seconds(p.pid) for p, _ in started)
        server_before = server_cpu(server)
        seconds = asyncio.run(drain([url for _, url in started], per_stream))
        return Drain(
            seconds,
            sum(cpu_seconds(p.pid) for p, _ in started) - collector_before,
            server_cpu(server) - server_before,
        )
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


@dataclass
class Paging:
    pages: list[float]  # each page's latency, seen by the client
    health: list[float]  # GET /health right after each page: the machine's own tail
    rows: int
    ended: bool


async def paging(url: str, after: str) -> Paging:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    result = Paging([], [], 0, False)
    async with aiohttp.ClientSession(headers=headers) as session:
        while True:
            began = time.perf_counter()
            async with session.get(f"{url}/events", params={"after": after, "limit": 1000}) as r:
                page = orjson.loads(await r.read())
            result.pages.append(time.perf_counter() - began)
            began = time.perf_counter()
            async with session.get(f"{url}/health") as r:
                await r.read()
            result.health.append(time.perf_counter() - began)
            result.rows += len(page["events"])
            if "next" not in page:
                result.ended = True
                return result
            if page["next"] == after:
                return result
            after = page["next"]


def percentiles(times: list[float]) -> str:
    ordered = sorted(times)
    return (
        f"median {ordered[len(ordered) // 2] * 1000:.1f} ms,"
        f" p99 {ordered[int(len(ordered) * 0.99)] * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--size", full=100_000, quick=2_000, help="envelopes drained")
    bench.size("--prefill", full=10_000_000, quick=2_000, help="envelopes already stored (0: none)")
    bench.size("--page-rows", full=1_000_000, quick=1_500, help="rows paged through")
    with bench.run() as args:
        run(bench, args)


def run(bench: Bench, args: argparse.Namespace) -> None:
    from tests import postgres

    bin_dir = postgres.binaries()
    if bin_dir is None:
        bench.unavailable(
            "PostgreSQL's server binaries are not installed (apt-get install postgresql)"
        )
    cluster = postgres.start(bin_dir, settings={"max_wal_size": "8GB"})
    work = Path(tempfile.mkdtemp(prefix="bench-collector-"))
    env = cluster.env()
    try:
        streams = workload(args.size)
        per_stream = bodies(streams)
        size = args.size
        server = cluster.process.pid
        print(f"drain ({size:,} envelopes, batches of {BATCH}, {STREAMS} streams at once)")
        one = run_drain([cluster.create_database("one")], env, per_stream, server)
        two_db = cluster.create_database("two")
        two = run_drain([two_db, two_db], env, per_stream, server)
        copy_db = cluster.create_database("copy")
        migrate(copy_db, env)
        copy_server = server_cpu(server)
        copy_client = time.process_time()
        copied = copy_rows(cluster.psql_url("copy"), streams)
        copy_cpu = Drain(
            copied, time.process_time() - copy_client, server_cpu(server) - copy_server
        )
        sqlite = run_drain([str(work / "collector.db")], env, per_stream, server)
        best = max(one.rate(size), two.rate(size))
        bench.figure(
            f"  PostgreSQL, 1 instance, team graph on ({one.cpu(size)})",
            one.rate(size),
            "/s",
            target=">= 30,000/s",
            met=one.rate(size) >= 30_000,
            peer=("COPY of the same rows", size / copied),
        )
        print(
            f"  PostgreSQL, 2 instances, team graph on{two.rate(size):>10,.0f} /s  {two.cpu(size)}"
        )
        print(
            f"  COPY of the same rows (peer)           {size / copied:>10,.0f} /s  -> best = {best / (size / copied):.2f}x (target >= 0.3x)"
            f"  {copy_cpu.cpu(size)} (client: the encoding, COPY's loop)"
        )
        print(f"  SQLite collector (peer)                {sqlite.rate(size):>10,.0f} /s")
        print(f"  load average after the drains: {load_average()}")
        with psycopg.connect(cluster.psql_url("two")) as conn:
            stored = conn.execute(
                "SELECT count(*), count(DISTINCT event_id) FROM events"
            ).fetchone()
        assert stored is not None  # an aggregate always has its row
        print(f"  stored after two instances: {stored[0]:,} rows, {stored[1]:,} distinct")
        with psycopg.connect(cluster.psql_url("one")) as conn:
            sizes = conn.execute(
                "SELECT pg_total_relation_size('events'), pg_database_size(current_database()),"
                " avg(octet_length(body)) FROM events"
            ).fetchone()
        assert sizes is not None  # an aggregate always has its row
        events, database, body = sizes
        # What retention sizing needs (docs/team.md): the events table with its indexes,
        # and the whole database with the team graph, per stored event; the peer is the
        # envelope's own JSON.
        print(
            f"  stored size per event: {events / size:,.0f} B (events and their indexes),"
            f" {database / size:,.0f} B (the whole database, graph included); the envelope"
            f" JSON itself (peer) {body:,.0f} B"
        )

        if args.prefill:
            big = cluster.create_database("big")
            migrate(big, env)
            took = prefill(cluster.psql_url("big"), args.prefill)
            print(
                f"grown ({args.prefill:,} envelopes prefilled by INSERT ... generate_series in {took:.0f} s)"
            )
            # An empty database right before and right after: the machine's load moves
            # between minutes, so the grown rate is compared with its neighbours.
            before = run_drain([cluster.create_database("empty_before")], env, per_stream, server)
            grown = run_drain([big], env, per_stream, server)
            after = run_drain([cluster.create_database("empty_after")], env, per_stream, server)
            empty_rate = (before.rate(size) + after.rate(size)) / 2
            print(
                f"  into an empty database, 1 instance     {before.rate(size):>10,.0f} /s before, {after.rate(size):,.0f} /s after"
            )
            print(
                f"  into {args.prefill:>11,} stored, 1 instance {grown.rate(size):>10,.0f} /s  = {grown.rate(size) / empty_rate:.2f}x the empty rate (target >= 0.8x)"
            )
            print(
                f"  {grown.cpu(size)}; empty before: {before.cpu(size)}; after: {after.cpu(size)}"
            )
            process, url = start_collector(big, env)
            try:
                with psycopg.connect(cluster.psql_url("big")) as conn:
                    start = conn.execute(
                        "SELECT txid::text || '.' || id FROM events"
                        " ORDER BY txid DESC, id DESC OFFSET %s LIMIT 1",
                        (args.page_rows,),
                    ).fetchone()
                # This process holds the whole workload (~100,000 envelopes as objects); a
                # full collection traverses it all, 70-80 ms a time, inside whichever page
                # it lands on. Frozen, the pages time the collector, not this client.
                gc.collect()
                gc.freeze()
                paged = asyncio.run(paging(url, start[0] if start else "0.0"))
            finally:
                process.terminate()
                process.wait()
            print(
                f"paging (GET /events?limit=1000 over the last {paged.rows:,} rows,"
                f" {len(paged.pages)} pages; load average {load_average()})"
            )
            print(
                f"  per page: {percentiles(paged.pages)} (target < 50 ms);"
                f" last page ends: {'yes' if paged.ended else 'NO'}"
            )
            slow = sum(t >= 0.05 for t in paged.pages)
            print(f"  pages at or over 50 ms: {slow} of {len(paged.pages)}")
            print(f"  GET /health after each page (peer): {percentiles(paged.health)}")
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()

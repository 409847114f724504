"""PSG write rate (a plan of 1,000 steps, 10,000 file nodes) and API latency under that load.

Run from the repository root: python bench/bench_psg.py [--quick] [--steps N] [--files N]
[--probes N]

Everything is real: a Workspace on a temporary state dir (WAL, synchronous=FULL), the
loopback HTTP API on 127.0.0.1, aiohttp as the client.

* plan create: one write of a plan with N steps (a chain plus random back edges): schema
  check, DAG check, N rows + edges, one bulk graph_update through the intake.
* status writes: the plan approved and started, then every step in_progress → completed,
  one transaction each plus its pipeline_stage stored through the intake (two commits per
  change); the first half alone, the second half while the latency probes run. Peer: the bare SQLite floor of one durable status change, an UPDATE plus an
  INSERT of an event row in one BEGIN IMMEDIATE/COMMIT on the calling thread. Since a PSG
  change commits twice (the graph, then the event), the ceiling is 0.5x. Target >= 0.3x.
* file nodes: N file_update events through the intake, the PSG file-node consumer upserting
  them and emitting bulk graph_updates; nodes/s until the bus is drained.
* latency: GET /psg/plans/{id} (the 1,000-step plan) and GET /health, sequential, while the
  status writes run through the same daemon; peer: the same requests with the daemon idle.
  Target: p95 of GET /health under load <= 50 ms (a human-facing tool stays responsive).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchlib.harness import Bench, percentile
from mplp_lsp.api.server import ApiServer
from mplp_lsp.api.services import ApiServices
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.database import connect

META = {"protocol_version": "1.0.0", "schema_version": "1.0.0"}
STATUS_TARGET = 0.3
LATENCY_TARGET_MS = 50.0


def make_plan(context_id: str, steps: int) -> dict[str, Any]:
    rng = random.Random(7)
    ids = [new_id() for _ in range(steps)]
    out = []
    for index, step_id in enumerate(ids):
        deps = {ids[index - 1]} if index else set()
        if index > 10:
            deps |= set(rng.sample(ids[:index], 2))
        step: dict[str, Any] = {
            "step_id": step_id,
            "description": f"step {index}",
            "status": "pending",
            "order_index": index,
        }
        if deps:
            step["dependencies"] = sorted(deps)
        out.append(step)
    return {
        "meta": META,
        "plan_id": new_id(),
        "context_id": context_id,
        "title": "bench",
        "objective": "measure",
        "status": "draft",
        "steps": out,
    }


def bare_status_writes(path: Path, count: int) -> float:
    """The floor: one durable status change (UPDATE + event INSERT) per transaction."""
    conn = connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_steps (id INTEGER PRIMARY KEY, status TEXT)")
    conn.executemany("INSERT INTO bench_steps VALUES (?, 'pending')", [(i,) for i in range(count)])
    body = '{"event_family":"pipeline_stage","stage_status":"running"}' + " " * 300
    start = time.perf_counter()
    for i in range(count):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE bench_steps SET status = 'running' WHERE id = ?", (i,))
        conn.execute(
            "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
            " VALUES (?, 'pipeline_stage', ?, ?, ?, ?)",
            (new_id(), new_id(), utc_timestamp(), utc_timestamp(), body),
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return count / elapsed


async def probe(session: aiohttp.ClientSession, url: str, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        async with session.get(url) as response:
            await response.read()
            assert response.status == 200, response.status
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        workspace = await Workspace.open(root, Settings(), state_dir=Path(tmp) / "state")
        api = ApiServer(
            ApiServices.of(workspace),
            workspace.paths,
        )
        await api.start()
        headers = {"Authorization": f"Bearer {api.token}"}
        try:
            async with aiohttp.ClientSession(headers=headers) as session:
                context_id = new_id()
                await workspace.psg.create_context(
                    {
                        "meta": META,
                        "context_id": context_id,
                        "title": "bench",
                        "status": "active",
                        "root": {"domain": "bench", "environment": "local"},
                    }
                )
                plan = make_plan(context_id, args.steps)
                plan_id = plan["plan_id"]
                start = time.perf_counter()
                await workspace.psg.create_plan(plan)
                create_s = time.perf_counter() - start

                plan_url = f"{api.url}/psg/plans/{plan_id}"
                health_url = f"{api.url}/health"
                idle_plan = await probe(session, plan_url, args.probes)
                idle_health = await probe(session, health_url, args.probes)

                for status in ("proposed", "approved", "in_progress"):
                    await workspace.psg.set_plan_status(plan_id, status)

                async def drive(steps: list[dict[str, Any]]) -> float:
                    begin = time.perf_counter()
                    for step in steps:
                        await workspace.psg.set_step_status(plan_id, step["step_id"], "in_progress")
                        await workspace.psg.set_step_status(plan_id, step["step_id"], "completed")
                    return 2 * len(steps) / (time.perf_counter() - begin)

                half = len(plan["steps"]) // 2
                status_rate = await drive(plan["steps"][:half])  # alone
                writer = asyncio.create_task(drive(plan["steps"][half:]))  # while probed
                await asyncio.sleep(0.05)
                busy_plan: list[float] = []
                busy_health: list[float] = []
                while True:  # at least once: a small plan's writes may be over already
                    busy_health += await probe(session, health_url, 5)
                    busy_plan += await probe(session, plan_url, 1)
                    if writer.done():
                        break
                probed_rate = await writer
                await workspace.psg.set_plan_status(plan_id, "completed")

                files = [
                    Submission(
                        Kind.FILE_UPDATE,
                        {
                            "file_path": f"src/d{i % 100}/f{i}.py",
                            "change_type": "created",
                            "timestamp": utc_timestamp(),
                        },
                        "bench",
                        trusted_paths=True,
                    )
                    for i in range(args.files)
                ]
                start = time.perf_counter()
                await workspace.intake.submit_many(files)
                await workspace.bus.drain()
                await workspace.bus.drain()
                file_s = time.perf_counter() - start
                nodes = await workspace.writer.read(
                    lambda c: c.execute("SELECT COUNT(*) FROM psg_files").fetchone()[0]
                )
        finally:
            await api.stop()
            await workspace.close()
        bare = bare_status_writes(Path(tmp) / "bare.db", min(args.steps, 1000))

    print(f"plan create ({args.steps} steps, one write)   {create_s * 1000:8.1f} ms")
    print(f"status writes (with stored pipeline_stage)  {status_rate:8.0f} /s")
    print(f"  while the API is probed                   {probed_rate:8.0f} /s")
    print(f"  peer: bare durable UPDATE+INSERT          {bare:8.0f} /s")
    print(f"  ratio {status_rate / bare:.2f}x  (target >= {STATUS_TARGET}x; ceiling 0.5x)")
    print(
        f"file nodes ({nodes} via intake + PSG)      {nodes / file_s:8.0f} nodes/s ({file_s:.2f} s)"
    )
    print(
        f"GET /health   idle p50 {statistics.median(idle_health):6.2f} ms  "
        f"p95 {percentile(idle_health, 0.95):6.2f} ms | under load p50 "
        f"{statistics.median(busy_health):6.2f} ms  p95 {percentile(busy_health, 0.95):6.2f} ms "
        f"(target p95 <= {LATENCY_TARGET_MS:.0f} ms)"
    )
    print(
        f"GET plan ({args.steps} steps) idle p50 {statistics.median(idle_plan):6.2f} ms  "
        f"p95 {percentile(idle_plan, 0.95):6.2f} ms | under load p50 "
        f"{statistics.median(busy_plan):6.2f} ms  p95 {percentile(busy_plan, 0.95):6.2f} ms"
    )


if __name__ == "__main__":
    bench = Bench(__doc__)
    bench.size("--steps", full=1000, quick=20, help="steps in the plan")
    bench.size("--files", full=10_000, quick=50, help="file_update events through the intake")
    bench.size("--probes", full=50, quick=5, help="idle requests timed per URL")
    with bench.run() as args:
        asyncio.run(main(args))

"""Durable appends through StoreWriter beside bare SQLite appends of the same envelopes.

Run from the repository root: python bench/bench_store.py [--quick] [--events N] [--segments S]
[--sequential N] [--callers C]

Both sides use the store's own database (same schema and indexes, WAL, synchronous=FULL),
so the only difference is the path to it:

* group commit: C asyncio tasks, each appending one event at a time through one
  StoreWriter, so concurrent calls merge into shared transactions. Peer: executemany of
  100 rows per transaction, bodies serialised before the clock starts (StoreWriter
  serialises inside its timing, so the ratio is conservative).
* sequential: a single task awaiting append([event]) per event, so every event pays a
  full commit. Peer: one BEGIN IMMEDIATE/INSERT/COMMIT per row on the calling thread.
  Reference: the same per-row commit through run_in_executor, the floor for any writer
  that keeps SQLite off the event loop (the thread hand-off is not StoreWriter's cost).

Targets (perf-baselines "Limits to aim at" L4/L5): group commit >= 0.6x the bare batched
append; sequential >= 0.9x the bare single-row commit. fsync cost drifts a lot on shared
machines, so the sides are interleaved finely: group segments alternate, and every
sequential event goes through all three paths in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from benchlib.harness import Bench
from mplp_lsp.protocol.envelope import build_envelope, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.database import connect
from mplp_lsp.store.events import NewEvent, encode_body
from mplp_lsp.store.writer import StoreWriter

GROUP_TARGET = 0.6
SEQUENTIAL_TARGET = 0.9
INSERT = (
    "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)


def make_events(n: int, offset: int) -> list[NewEvent]:
    events = []
    for i in range(offset, offset + n):
        payload = {
            "file_path": f"src/pkg/module_{i % 500}.py",
            "change_type": "modified",
            "timestamp": "2026-03-02T08:01:00.123Z",
            "lines_added": i % 7,
            "lines_removed": i % 3,
            "encoding": "utf-8",
            "language": "python",
        }
        envelope = build_envelope(Kind.FILE_UPDATE, payload, source_module="ide")
        events.append(
            NewEvent(
                event_id=envelope["event_id"],
                kind="file_update",
                dedup_key=f"file_update:{i}",
                timestamp=envelope["timestamp"],
                envelope=envelope,
            )
        )
    return events


def rows_of(events: list[NewEvent]) -> list[tuple[str | bytes, ...]]:
    now = utc_timestamp()
    return [
        (e.event_id, e.kind, e.dedup_key, e.timestamp, now, encode_body(e.envelope)) for e in events
    ]


class BarePeer:
    """The same database and statements without StoreWriter: what the physics costs."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def batched(self, rows: list[tuple[str | bytes, ...]], batch: int = 100) -> float:
        start = time.perf_counter()
        for offset in range(0, len(rows), batch):
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(INSERT, rows[offset : offset + batch])
            self.conn.execute("COMMIT")
        return time.perf_counter() - start

    def batched_encoding(self, events: list[NewEvent], batch: int = 100) -> float:
        """Like batched(), but serialising each envelope inside the timing, as the store must."""
        start = time.perf_counter()
        for offset in range(0, len(events), batch):
            rows = rows_of(events[offset : offset + batch])
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(INSERT, rows)
            self.conn.execute("COMMIT")
        return time.perf_counter() - start

    def single(self, row: tuple[str | bytes, ...]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(INSERT, row)
        self.conn.execute("COMMIT")


async def group_segment(writer: StoreWriter, events: list[NewEvent], callers: int) -> float:
    feed = iter(events)

    async def caller() -> None:
        for event in feed:
            await writer.append([event])

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return time.perf_counter() - start


async def run(args: argparse.Namespace, base: Path) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    writer = StoreWriter(base / "writer.db")
    await writer.start()
    bare = BarePeer(connect(base / "bare.db"))
    offset = 0

    def fresh(n: int) -> list[NewEvent]:
        """``n`` events no earlier call made (their dedup keys are unique)."""
        nonlocal offset
        offset += n
        return make_events(n, offset - n)

    # Group commit: the sides take turns within each segment, in a rotating order, so drift
    # hits them alike.
    group_time = batched_time = encoding_time = 0.0
    ratios = []
    commits_before = writer.commits
    per_segment = max(1, args.events // args.segments)
    for segment in range(args.segments):
        events, rows, raw = fresh(per_segment), rows_of(fresh(per_segment)), fresh(per_segment)
        timings: dict[str, float] = {}
        sides = ["group", "batched", "encoding"]
        for side in sides[segment % 3 :] + sides[: segment % 3]:
            if side == "group":
                timings[side] = await group_segment(writer, events, args.callers)
            elif side == "batched":
                timings[side] = bare.batched(rows)
            else:
                timings[side] = bare.batched_encoding(raw)
        group_time += timings["group"]
        batched_time += timings["batched"]
        encoding_time += timings["encoding"]
        ratios.append(timings["batched"] / timings["group"])
    total = per_segment * args.segments
    group_commits = writer.commits - commits_before

    # Sequential: every event alternates between the three paths, one commit each.
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bench-floor")
    # Opened and used on the executor thread only, like StoreWriter's connection.
    floor = BarePeer(await loop.run_in_executor(executor, connect, base / "floor.db"))
    seq_time = single_time = floor_time = 0.0
    events = fresh(args.sequential)
    rows = rows_of(fresh(args.sequential))
    floor_rows = rows_of(fresh(args.sequential))
    for event, row, floor_row in zip(events, rows, floor_rows, strict=True):
        start = time.perf_counter()
        bare.single(row)
        middle = time.perf_counter()
        await loop.run_in_executor(executor, floor.single, floor_row)
        end = time.perf_counter()
        await writer.append([event])
        single_time += middle - start
        floor_time += end - middle
        seq_time += time.perf_counter() - end
    await loop.run_in_executor(executor, floor.conn.close)
    executor.shutdown()
    bare.conn.close()
    await writer.close()
    return {
        "group": total / group_time,
        "batched": total / batched_time,
        "encoding": total / encoding_time,
        "group_ratio_median": statistics.median(ratios),
        "batch_size": total / max(group_commits, 1),
        "sequential": args.sequential / seq_time,
        "single": args.sequential / single_time,
        "floor": args.sequential / floor_time,
    }


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--events", full=40_000, quick=300, help="events on each group side")
    bench.size("--segments", full=20, quick=3, help="alternating group segments")
    bench.size("--sequential", full=3_000, quick=20, help="sequential events")
    bench.size("--callers", full=256, quick=8, help="concurrent appending tasks")
    with bench.run() as args:
        with tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(run(args, Path(tmp)))
        report(bench, args, result)


def report(bench: Bench, args: argparse.Namespace, result: dict[str, float]) -> None:

    group_ratio = result["group"] / result["batched"]
    sequential_ratio = result["sequential"] / result["single"]
    print("durable appends, WAL + synchronous=FULL, same schema, same run")
    print(f"{'measurement':<66}{'events/s':>10}")
    for label, key in [
        (f"StoreWriter.append, {args.callers} concurrent callers (group commit)", "group"),
        ("  peer: bare executemany, 100 rows per transaction", "batched"),
        ("  reference: the same, serialising the envelopes inside the timing", "encoding"),
        ("StoreWriter.append, one sequential caller", "sequential"),
        ("  peer: bare BEGIN IMMEDIATE/INSERT/COMMIT per row", "single"),
        ("  reference: same per-row commit via run_in_executor (off-loop floor)", "floor"),
    ]:
        print(f"{label:<66}{result[key]:>10,.0f}")
    print(f"events per group-commit transaction: {result['batch_size']:.1f}")
    print(f"median of per-segment group/batched ratios: {result['group_ratio_median']:.2f}x")
    for label, ratio, target in [
        ("group commit / bare batched append", group_ratio, GROUP_TARGET),
        ("sequential / bare single-row commit", sequential_ratio, SEQUENTIAL_TARGET),
    ]:
        print(f"{label:<40} {ratio:5.2f}x   target >= {target}x: {bench.verdict(ratio >= target)}")
    print(
        f"{'sequential / off-loop floor':<40} {result['sequential'] / result['floor']:5.2f}x"
        "   (StoreWriter's own cost beyond the thread hand-off)"
    )


if __name__ == "__main__":
    main()

"""Validated events per second, per kind, beside a bare durable SQLite append of the same events.

Run from the repository root: python bench/bench_validate.py [--quick] [--events N] [--rounds R]

validate() is the full check the intake runs: schema (fast path) + invariants. The peer is
the physical cost the intake pays anyway: appending the same events' JSON to SQLite (WAL,
synchronous=FULL) in transactions of 100. Target: >= 50,000 validated file_update events/s.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib.harness import Bench
from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import default_validator

TARGET = 50_000


def typical_file_update(i: int) -> dict[str, Any]:
    return {
        "file_path": f"src/pkg/module_{i % 500}.py",
        "change_type": "modified",
        "timestamp": "2026-03-02T08:01:00.123Z",
        "lines_added": i % 7,
        "lines_removed": i % 3,
        "encoding": "utf-8",
        "language": "python",
    }


def events_for(kind: Kind, n: int) -> list[dict[str, Any]]:
    from tests.conftest import sample  # the test suite's valid fixture of each kind

    if kind is Kind.FILE_UPDATE:
        return [typical_file_update(i) for i in range(n)]
    if kind is Kind.ENVELOPE:
        return [
            build_envelope(Kind.FILE_UPDATE, typical_file_update(i), source_module="ide")
            for i in range(n)
        ]
    return [sample(kind.value) for _ in range(n)]


def rate(fn: Any, items: list[Any], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            fn(item)
        samples.append(len(items) / (time.perf_counter() - start))
    return statistics.median(samples)


def sqlite_append_rate(items: list[dict[str, Any]], rounds: int) -> float:
    samples = []
    rows = [(json.dumps(item),) for item in items]
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            db = sqlite3.connect(Path(tmp) / "bench.db", isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("CREATE TABLE events(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
            start = time.perf_counter()
            for offset in range(0, len(rows), 100):
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT INTO events(body) VALUES (?)", rows[offset : offset + 100])
                db.execute("COMMIT")
            samples.append(len(rows) / (time.perf_counter() - start))
            db.close()
    return statistics.median(samples)


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--events", full=20_000, quick=100, help="events of each kind")
    bench.size("--rounds", full=5, quick=1, help="timed rounds (the median is shown)")
    with bench.run() as args:
        rates = table(args.events, args.rounds)
        print(
            f"target: >= {TARGET:,} validated file_update events/s (validation never the "
            f"bottleneck: ratio > 1): {bench.verdict(rates[Kind.FILE_UPDATE] >= TARGET)}"
        )


def table(events: int, rounds: int) -> dict[Kind, float]:
    """Print each kind's rates beside its SQLite append; the validate() rate of each kind."""
    validator = default_validator()
    kinds = [
        Kind.FILE_UPDATE,
        Kind.TOOL,
        Kind.GIT,
        Kind.CI,
        Kind.ENVELOPE,
        Kind.PIPELINE_STAGE,
        Kind.GRAPH_UPDATE,
    ]
    print(
        f"{'kind':<18}{'validate() ev/s':>16}{'oracle ev/s':>14}{'sqlite append ev/s':>20}{'validate/append':>17}"
    )
    rates = {}
    for kind in kinds:
        items = events_for(kind, events)
        assert all(validator.validate(kind, item).ok for item in items[:10])
        fast = rates[kind] = rate(lambda item, k=kind: validator.validate(k, item), items, rounds)
        oracle = rate(lambda item, k=kind: validator.oracle_issues(k, item), items[:1000], 1)
        append = sqlite_append_rate(items, max(1, rounds // 2))
        print(
            f"{kind.value:<18}{fast:>16,.0f}{oracle:>14,.0f}{append:>20,.0f}{fast / append:>16.2f}x"
        )
    return rates


if __name__ == "__main__":
    main()

"""A large event store as a user of the previous release has it, built in minutes.

The rows are what that release's intake stored: envelopes built by today's envelope builder
(file changes, graph updates, commits, tool and CI runs in the proportions of a day's work),
keys of today's form, ``timestamp`` the envelope's time (the previous release's column),
over a year of work. About one event in a hundred is dated away from its arrival (a CI run
reported when it ends, a commit handed over later, a script that emits yesterday's run), as
a real log has them. The file is written without fsync (``synchronous = OFF``): a benchmark
fixture, not a store to keep.

    build_store(path, events=1_000_000)   # schema version ``PREVIOUS_SCHEMA``
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from mplp_lsp.graph.graph_events import graph_update
from mplp_lsp.protocol.envelope import build_envelope, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.dedup import event_key, id_key
from mplp_lsp.store.events import encode_body

# The schema of the release before event-time order (its last migration: the timeline).
PREVIOUS_SCHEMA: Final = 13
_BATCH: Final = 20_000
_START: Final = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
_YEAR_S: Final = 365 * 86_400
_LATE_SHARE: Final = 0.01

_INSERT: Final = (
    "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body, minted)"
    " VALUES (?, ?, ?, ?, ?, ?, 1)"
)


def build_store(path: Path, *, events: int, seed: int = 35) -> float:
    """Write ``events`` events into a new store at ``path``; returns the seconds it took."""
    from tests.old_store import store_at_version

    began = time.perf_counter()
    conn = store_at_version(path, PREVIOUS_SCHEMA)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        rows = _rows(random.Random(seed), events)
        while batch := [row for _, row in zip(range(_BATCH), rows, strict=False)]:
            conn.execute("BEGIN")
            conn.executemany(_INSERT, batch)
            conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return time.perf_counter() - began


def commit_payload(rng: random.Random, at: str) -> dict[str, Any]:
    """A commit on main as the git source reports one (the author's address already hashed)."""
    return {
        "repo_url": "local:3f1c2a",
        "commit_id": rng.randbytes(20).hex(),
        "ref_name": "refs/heads/main",
        "event_kind": "commit",
        "author_name": "A. Developer",
        "author_email": "3a7bd3e2360a3d29eea436fcfb7e44c7@hashed.invalid",
        "commit_message": "Tidy the parser's error path",
        "timestamp": at,
        "files_changed": rng.randint(1, 9),
        "insertions": rng.randint(1, 200),
        "deletions": rng.randint(0, 90),
    }


def _rows(rng: random.Random, count: int) -> Iterator[tuple[Any, ...]]:
    step = _YEAR_S / count
    files = [f"src/pkg{n % 40}/module_{n}.py" for n in range(600)]
    graph = "0f6c9b1e-4d55-4c1b-9a5e-3b7f2c8d1e90"
    for n in range(count):
        arrived = _START + timedelta(seconds=n * step)
        happened = arrived - timedelta(milliseconds=rng.randint(50, 600))
        if rng.random() < _LATE_SHARE:
            happened -= timedelta(hours=rng.uniform(1, 24 * 30))
        at = utc_timestamp(happened)
        draw = rng.random()
        if draw < 0.80:
            kind = Kind.FILE_UPDATE
            payload: dict[str, Any] = {
                "file_path": rng.choice(files),
                "change_type": "modified" if rng.random() < 0.9 else "created",
                "timestamp": at,
                "language": "python",
                "lines_added": rng.randint(0, 40),
                "lines_removed": rng.randint(0, 20),
            }
        elif draw < 0.88:
            envelope = graph_update(
                graph,
                "node_update",
                "file_node_updated",
                {"node_type": "file", "node_id": rng.choice(files), "cause": "file_update"},
            )
            envelope["timestamp"] = utc_timestamp(arrived)
            key = id_key(envelope["event_id"], envelope["timestamp"])
            yield _row(Kind.GRAPH_UPDATE.value, envelope, key, arrived)
            continue
        elif draw < 0.93:
            kind = Kind.GIT
            payload = commit_payload(rng, at)
        elif draw < 0.98:
            kind = Kind.TOOL
            payload = {
                "tool_id": "ruff-0.6.9",
                "tool_kind": "linter",
                "invocation_id": "7c1f4a52-2b9e-4d3a-8f60-1e5d9c4b7a21",
                "status": "succeeded",
                "started_at": utc_timestamp(happened - timedelta(seconds=2)),
                "completed_at": at,
                "exit_code": 0,
                "output_summary": "All checks passed!",
                "args": ["check", "src"],
            }
        else:
            kind = Kind.CI
            payload = {
                "ci_provider": "github_actions",
                "pipeline_id": "ci.yml",
                "run_id": str(n),
                "status": "succeeded",
                "started_at": utc_timestamp(happened - timedelta(minutes=6)),
                "completed_at": at,
                "branch_name": "main",
                "commit_id": rng.randbytes(20).hex(),
            }
        envelope = build_envelope(
            kind, payload, source_module="ide", timestamp=utc_timestamp(arrived)
        )
        yield _row(kind.value, envelope, event_key(kind.value, payload), arrived)


def _row(kind: str, envelope: dict[str, Any], key: bytes, arrived: datetime) -> tuple[Any, ...]:
    received = utc_timestamp(arrived + timedelta(milliseconds=3))
    body = encode_body(envelope)
    return (envelope["event_id"], kind, key, envelope["timestamp"], received, body)

"""A damaged store salvaged, then forwarding to a real collector on 127.0.0.1: the salvaged
store sends in a new stream, so no (stream, seq) ever names two events; the loss is counted
against the highest seq known; a store file emptied where one existed is a salvage."""

from __future__ import annotations

import os
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.collector import TOKEN, Collector
from tests.support.forwarding import drained, open_workspace, submissions, truncate

FIRST = 2_000


def empty(path: Path) -> None:
    os.truncate(path, 0)


async def store_and_forward(
    root: Path, state: Path, collector: Collector, first: int, count: int
) -> None:
    ws = await open_workspace(root, state, collector.url)
    try:
        await ws.intake.submit_many(submissions(count, first=first))
        await ws.settle()
        await drained(ws)
    finally:
        await ws.close()


@pytest.mark.parametrize("damage", [truncate, empty])
async def test_salvage_then_forward_reuses_no_stream_and_seq(
    damage: Callable[[Path], None],
    tmp_path: Path,
    workspace: Path,
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)
    collector = Collector(tmp_path / "collector.db")
    try:
        await store_and_forward(workspace, state_dir, collector, 0, FIRST)
        db = state_dir / "events.db"
        conn = sqlite3.connect(db)
        highest = conn.execute("SELECT max(seq) FROM events").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        damage(db)
        # The salvaged store goes on: new events take the seqs the lost ones had.
        await store_and_forward(workspace, state_dir, collector, 10**6, 500)
        ws = await open_workspace(workspace, state_dir, None)
        try:
            status = await ws.status()
        finally:
            await ws.close()
        received = collector.events()
    finally:
        collector.stop()
    names: defaultdict[tuple[str, int], set[str]] = defaultdict(set)
    for event in received:
        names[(event["stream"], event["seq"])].add(event["envelope"]["event_id"])
    clashes = {pair: ids for pair, ids in names.items() if len(ids) > 1}
    assert not clashes, f"{len(clashes)} (stream, seq) pairs name two events"
    assert len({stream for stream, _ in names}) == 2  # the salvaged store's own stream
    assert status.store_health == "degraded" and status.salvage is not None
    copied = status.salvage["copied"].get("events", 0)
    assert status.salvage["highest_seq"] == highest
    assert status.salvage["lost"]["events"] == highest - copied > 0
    assert status.forward is not None and status.forward["quarantined"] == highest - copied

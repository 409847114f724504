"""The in-process bus: ordered delivery, isolation of failing consumers, batching."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from mplp_lsp.engine.bus import EventBus
from mplp_lsp.store.events import StoredEvent


def event(seq: int, kind: str = "file_update") -> StoredEvent:
    return StoredEvent(
        seq=seq, event_id=f"id{seq}", kind=kind, timestamp="t", received_at="t", envelope={}
    )


async def test_delivers_in_order_and_merges_queued_batches() -> None:
    bus = EventBus()
    calls: list[list[int]] = []

    async def handler(events: Sequence[StoredEvent]) -> None:
        calls.append([e.seq for e in events])

    bus.subscribe("a", handler)
    for seq in range(5):
        bus.publish([event(seq)])
    await bus.drain()
    assert [s for call in calls for s in call] == [0, 1, 2, 3, 4]
    assert len(calls) < 5  # batches queued together arrive together
    await bus.close()


async def test_a_failing_consumer_does_not_affect_others_or_itself_later() -> None:
    bus = EventBus()
    seen: list[int] = []
    attempts = 0

    async def broken(events: Sequence[StoredEvent]) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise RuntimeError("boom")

    async def fine(events: Sequence[StoredEvent]) -> None:
        seen.extend(e.seq for e in events)

    bus.subscribe("broken", broken)
    bus.subscribe("fine", fine)
    bus.publish([event(1)])
    await bus.drain()
    bus.publish([event(2)])
    await bus.drain()
    assert seen == [1, 2]
    assert attempts == 2
    assert bus.failures() == {"broken": 1, "fine": 0}
    await bus.close()


@pytest.mark.parametrize(
    ("error", "traceback"),
    [
        (sqlite3.OperationalError("database or disk is full"), False),
        (OSError(errno.ENOSPC, "No space left on device"), False),
        (RuntimeError("boom"), True),
    ],
)
async def test_a_full_disk_is_one_line_and_a_defect_keeps_its_traceback(
    error: Exception, traceback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    bus = EventBus()

    async def failing(events: Sequence[StoredEvent]) -> None:
        raise error

    bus.subscribe("graph", failing)
    bus.publish([event(1)])
    await bus.drain()
    (record,) = [r for r in caplog.records if r.name == "mplp_lsp.engine.bus"]
    assert "bus consumer graph failed on 1 events" in record.getMessage()
    assert (record.exc_info is not None) is traceback
    assert bus.failures() == {"graph": 1}
    await bus.close()


async def test_kind_filter() -> None:
    bus = EventBus()
    seen: list[str] = []

    async def handler(events: Sequence[StoredEvent]) -> None:
        seen.extend(e.kind for e in events)

    bus.subscribe("files", handler, kinds={"file_update"})
    bus.publish([event(1, "git"), event(2, "file_update"), event(3, "graph_update")])
    await bus.drain()
    assert seen == ["file_update"]
    await bus.close()
    bus.publish([event(4)])  # after close: dropped, no error


async def test_a_gate_holds_delivery_and_what_queues_meanwhile_comes_as_one_batch() -> None:
    bus = EventBus()
    opened = asyncio.Event()
    calls: list[list[int]] = []

    async def gate() -> None:
        await opened.wait()

    async def handler(events: Sequence[StoredEvent]) -> None:
        calls.append([e.seq for e in events])

    bus.subscribe("gated", handler, gate=gate)
    for seq in range(4):
        bus.publish([event(seq)])
        await asyncio.sleep(0.01)
    assert calls == []
    opened.set()
    await bus.drain()
    assert calls == [[0, 1, 2, 3]]
    await bus.close()


@pytest.mark.parametrize(("its_time", "most"), [(False, 1_000), (True, 5_000), (None, 5_000)])
async def test_a_consumer_let_through_early_takes_a_bounded_batch(
    its_time: bool | None, most: int
) -> None:
    """Lower-priority work (the graph behind a burst) let through before its time gets its
    turns in bounded batches, in order, nothing left behind: such a turn never holds the
    writer long. Let through in its time, it takes everything queued at once."""
    bus = EventBus()
    opened = asyncio.Event()
    turns = 0
    calls: list[list[int]] = []

    async def gate() -> bool | None:
        nonlocal turns
        await opened.wait()
        turns += 1
        return its_time

    async def handler(events: Sequence[StoredEvent]) -> None:
        calls.append([e.seq for e in events])

    bus.subscribe("gated", handler, gate=gate)
    for start in range(0, 5_000, 250):  # as the intake publishes: a slice at a time
        bus.publish([event(seq) for seq in range(start, start + 250)])
    await asyncio.sleep(0.01)
    opened.set()
    await bus.drain()
    assert [s for call in calls for s in call] == list(range(5_000))
    assert max(len(call) for call in calls) == most
    assert turns == len(calls) == 5_000 // most
    await bus.close()


async def test_a_durable_consumer_catches_up_from_the_log_and_keeps_its_place(
    tmp_path: Path,
) -> None:
    from mplp_lsp.store.positions import ConsumerPosition
    from mplp_lsp.store.writer import StoreWriter
    from tests.support.stores import make_event

    writer = StoreWriter(tmp_path / "events.db")
    await writer.start()
    try:
        await writer.append([make_event(n) for n in range(5)])  # committed, never published
        seen: list[int] = []

        async def handler(events: Sequence[StoredEvent]) -> None:
            seen.extend(e.seq for e in events)

        bus = EventBus()
        bus.subscribe("graph", handler, position=ConsumerPosition(writer, "graph"))
        stored = await writer.append([make_event(n) for n in range(5, 7)])
        bus.publish([e for e in stored if e is not None])  # also in the catch-up's read
        await bus.drain()
        await bus.close()
        assert seen == [1, 2, 3, 4, 5, 6, 7]  # each once, in order
        again = EventBus()  # a restart: nothing new, nothing handled twice
        again.subscribe("graph", handler, position=ConsumerPosition(writer, "graph"))
        await again.drain()
        await again.close()
        assert seen == [1, 2, 3, 4, 5, 6, 7]
    finally:
        await writer.close()

"""Real stores for a test: events made, dead letters and their counters read back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.engine.bus import EventBus
from mplp_lsp.engine.intake import Intake
from mplp_lsp.forward import outbox
from mplp_lsp.store import (
    EventLog,
    IntegrationErrorLog,
    NewEvent,
    StoredEvent,
    StoreWriter,
    connect,
)
from tests.support.forwarding import collector_sink, pending_entries, pending_seqs
from tests.support.forwarding import new_event as forwarded_event

REFUSALS = {
    2: (400, "HTTP 400: invalid envelope", "2026-03-02T09:00:00.000Z"),
    4: (401, "HTTP 401", "2026-03-02T09:00:01.000Z"),
    5: (None, "HTTP 422: \x1b[31mred\nsecond line", "2026-03-02T09:00:02.000Z"),
}


def new_event(n: int) -> NewEvent:
    # A kind no consumer of the store's owner reads: `outbox requeue` runs the owner (which
    # catches its consumers up), and these skeletal envelopes are only for forwarding.
    return forwarded_event(n, "graph_update")


def make_store(db: Path, count: int, refusals: dict[int, tuple[int | None, str, str]]) -> None:
    """``count`` forwarded events (seq 1..count); those in ``refusals`` dead-lettered."""
    conn = connect(db)
    try:
        sink = collector_sink(conn)
        outbox.enable(conn, sink, budget_bytes=2**30)
        EventLog(conn).append([new_event(n) for n in range(1, count + 1)])
        refused: dict[tuple[int | None, str, str], list[int]] = {}
        for seq, refusal in refusals.items():
            refused.setdefault(refusal, []).append(seq)
        for (status, reason, at), seqs in refused.items():  # one transaction per kind
            dead = outbox.dead_letter(conn, sink, seqs, status=status, reason=reason, at=at)
            assert dead == len(seqs)
    finally:
        conn.close()


def tables(db: Path) -> tuple[list[int], list[int], outbox.OutboxState]:
    """Pending seqs, dead seqs, and the counters, as stored."""
    conn = connect(db, read_only=True)
    try:
        pending = pending_seqs(conn)
        dead = [row[0] for row in conn.execute("SELECT seq FROM outbox_dead ORDER BY seq")]
        return pending, dead, outbox.read_state(conn, collector_sink(conn))
    finally:
        conn.close()


def assert_counters_match_tables(db: Path) -> None:
    conn = connect(db, read_only=True)
    try:
        entries = pending_entries(conn)
        state = outbox.read_state(conn, collector_sink(conn))
    finally:
        conn.close()
    size = sum(len(entry.body.encode()) for entry in entries)
    assert (state.pending, state.pending_bytes) == (len(entries), size)


def make_event(
    n: int,
    *,
    kind: str = "file_update",
    key: str | None = None,
    event_id: str | None = None,
    timestamp: str = "2026-03-02T08:00:00.000Z",
    **extra: Any,
) -> NewEvent:
    event_id = event_id or f"id-{n}"
    envelope = {"event_id": event_id, "timestamp": timestamp, "payload": {"n": n, **extra}}
    return NewEvent(
        event_id=event_id,
        kind=kind,
        dedup_key=key or f"key-{n}",
        timestamp=timestamp,
        envelope=envelope,
    )


class Rig:
    def __init__(
        self, root: Path, writer: StoreWriter, bus: EventBus, log: IntegrationErrorLog
    ) -> None:
        self.root, self.writer, self.bus, self.log = root, writer, bus, log
        self.intake = Intake(writer, bus, log, root=root)
        self.published: list[StoredEvent] = []

        async def collect(events: Sequence[StoredEvent]) -> None:
            self.published.extend(events)

        bus.subscribe("test", collect)

    async def stored(self) -> list[StoredEvent]:
        return await self.writer.read(lambda conn: EventLog(conn).query())

    async def counters(self) -> dict[str, int]:
        return await self.writer.read(lambda conn: EventLog(conn).counters())


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    root = tmp_path / "ws"
    root.mkdir()
    writer = StoreWriter(tmp_path / "events.db")
    await writer.start()
    bus = EventBus()
    rig = Rig(root.resolve(), writer, bus, IntegrationErrorLog(tmp_path / "errors.jsonl"))
    yield rig
    await bus.close()
    await writer.close()

"""Send what one store's outbox holds to a remote, for a bounded time, then stop.

For a process that is not a daemon: ``mplp-lsp emit ... --remote URL`` in a CI job stores its
event in the workspace's store (the durable spool) and then forwards the outbox with the
daemon's own forwarder (same batching, retry rules, Retry-After, dead letters) until it is
empty or the time is up. Whatever is left stays queued in the store and goes with the next
run that forwards from it (another ``emit --remote``, or a daemon with a remote).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import dataclass

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.bus import EventBus
from mplp_lsp.forward import outbox
from mplp_lsp.forward.service import Forwarding
from mplp_lsp.store.writer import StoreWriter

_POLL = 0.02


@dataclass(frozen=True, slots=True)
class DrainReport:
    remote: str | None
    pending: int  # still queued when the time was up (kept for the next run)
    dead_lettered: int  # refused by the remote during this run
    dead_letters: int = 0  # held in the store's dead-letter table now, from every run
    problem: str | None = None  # a misconfigured remote (nothing was sent)
    last_error: str | None = None


class Drain:
    """Start before the events are stored (queuing is on from then), finish after."""

    def __init__(self, writer: StoreWriter, bus: EventBus, remote_url: str) -> None:
        self._writer = writer
        self._bus = bus
        self._remote_url = remote_url
        self._forwarding: Forwarding | None = None

    async def start(self, settings: Settings) -> None:
        self._forwarding = await Forwarding.start(
            self._writer, self._bus, settings, self._remote_url
        )

    async def finish(self, wait: float) -> DrainReport:
        """Forward until the outbox is empty or ``wait`` seconds passed, then stop; at once
        when the remote cannot be reached at all (connection refused, unknown host)."""
        forwarding = self._forwarding
        assert forwarding is not None, "start() first"
        before = await self._writer.read(_collector)
        if forwarding.forwarder is None:
            return DrainReport(None, before.pending, 0, problem=forwarding.problem or "no remote")
        forwarding.forwarder.wake()
        deadline = time.monotonic() + wait
        try:
            while True:
                state = await self._writer.read(_collector)
                if state.pending == 0 or time.monotonic() >= deadline:
                    break
                if forwarding.forwarder.unreachable:
                    break  # nothing listens there: waiting would only block the caller
                await asyncio.sleep(_POLL)
        finally:
            await forwarding.close()
        state = await self._writer.read(_collector)
        return DrainReport(
            forwarding.remote.url if forwarding.remote else None,
            state.pending,
            state.dead_lettered - before.dead_lettered,
            state.dead_letters,
            last_error=forwarding.forwarder.last_error,
        )


def _collector(conn: sqlite3.Connection) -> outbox.OutboxState:
    """The collector sink's queue (the one ``emit --remote`` drains): every store has it
    (the migration that made sinks, and a salvage, make it)."""
    found = outbox.state_of(conn, outbox.COLLECTOR)
    assert found is not None, "a store without the collector sink"
    return found

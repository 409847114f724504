"""The in-process event bus: stored events out to their consumers.

Only committed events are published (accepted means durable). Each subscriber has its own
queue and task: a slow or failing consumer never blocks the intake or the others, and
consecutive batches queued for one subscriber are handed over together, so a burst of
20,000 file events reaches the PSG as a few large batches, not 20,000 calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field

from mplp_lsp.store.events import StoredEvent

log = logging.getLogger(__name__)

Handler = Callable[[Sequence[StoredEvent]], Awaitable[None]]
Gate = Callable[[], Awaitable[None]]
_MAX_MERGED = 5_000


@dataclass
class _Subscriber:
    name: str
    handler: Handler
    kinds: frozenset[str] | None
    gate: Gate | None
    queue: asyncio.Queue[list[StoredEvent]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    failures: int = 0
    delivered: int = 0


class EventBus:
    def __init__(self) -> None:
        self._subscribers: list[_Subscriber] = []
        self._closed = False

    def subscribe(
        self,
        name: str,
        handler: Handler,
        *,
        kinds: Collection[str] | None = None,
        gate: Gate | None = None,
    ) -> None:
        """``gate``, when given, is awaited before each delivery: lower-priority work waits
        for it, and what was published meanwhile is handed over in the same batch."""
        subscriber = _Subscriber(
            name, handler, frozenset(kinds) if kinds is not None else None, gate
        )
        subscriber.task = asyncio.get_running_loop().create_task(
            self._deliver(subscriber), name=f"bus:{name}"
        )
        self._subscribers.append(subscriber)

    def publish(self, events: Sequence[StoredEvent]) -> None:
        if self._closed or not events:
            return
        for subscriber in self._subscribers:
            wanted = (
                list(events)
                if subscriber.kinds is None
                else [e for e in events if e.kind in subscriber.kinds]
            )
            if wanted:
                subscriber.queue.put_nowait(wanted)

    async def _deliver(self, subscriber: _Subscriber) -> None:
        while True:
            batch = await subscriber.queue.get()
            if subscriber.gate is not None:
                await subscriber.gate()
            taken = 1
            while not subscriber.queue.empty() and len(batch) < _MAX_MERGED:
                batch.extend(subscriber.queue.get_nowait())
                taken += 1
            try:
                await subscriber.handler(batch)
                subscriber.delivered += len(batch)
            except Exception:
                # A broken consumer degrades itself, never the bus (spec §7.7).
                subscriber.failures += 1
                log.exception("bus consumer %s failed on %d events", subscriber.name, len(batch))
            finally:
                for _ in range(taken):
                    subscriber.queue.task_done()

    async def drain(self) -> None:
        """Wait until every subscriber has handled everything published so far."""
        for subscriber in self._subscribers:
            await subscriber.queue.join()

    def failures(self) -> dict[str, int]:
        return {s.name: s.failures for s in self._subscribers}

    async def close(self) -> None:
        if self._closed:
            return
        await self.drain()
        self._closed = True
        for subscriber in self._subscribers:
            if subscriber.task is not None:
                subscriber.task.cancel()
        await asyncio.gather(
            *(s.task for s in self._subscribers if s.task is not None), return_exceptions=True
        )

"""The in-process event bus: stored events out to their consumers.

Only committed events are published (accepted means durable). Each subscriber has its own
queue and task: a slow or failing consumer never blocks the intake or the others, and
consecutive batches queued for one subscriber are handed over together, so a burst of
20,000 file events reaches the PSG as a few large batches, not 20,000 calls.

A subscriber with a :class:`~mplp_lsp.store.positions.ConsumerPosition` is durable: it first
reads what the log holds after its recorded position (what a crash kept from it), records
its position after each batch, and skips what it has handled already when the same events
also come through the queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field

from mplp_lsp.store.disk_full import is_disk_full
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.positions import ConsumerPosition

log = logging.getLogger(__name__)

Handler = Callable[[Sequence[StoredEvent]], Awaitable[None]]
# Lets lower-priority work through: True (or None) when it is its time, False when it was
# let through early, while other work goes on (its turn is then bounded).
Gate = Callable[[], Awaitable[bool | None]]
_MAX_MERGED = 5_000
# A gated (lower-priority) subscriber let through early takes at most this many events:
# during a burst its gate lets it through now and then, and such a turn must not hold the
# store's writer and the event loop for long (a turn of 5,000 file nodes held a 20,000-path
# burst's commits back by a second and more).
_GATED_MERGED = 1_000


@dataclass
class _Subscriber:
    name: str
    handler: Handler
    kinds: frozenset[str] | None
    gate: Gate | None
    position: ConsumerPosition | None = None
    queue: asyncio.Queue[list[StoredEvent]] = field(default_factory=asyncio.Queue)
    caught_up: asyncio.Event = field(default_factory=asyncio.Event)
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
        position: ConsumerPosition | None = None,
    ) -> None:
        """``gate``, when given, is awaited before each delivery: lower-priority work waits
        for it, and what was published meanwhile is handed over in the same batch (up to
        ``_GATED_MERGED`` events when the gate let it through early).
        ``position`` makes the subscriber durable (see the module docstring)."""
        subscriber = _Subscriber(
            name, handler, frozenset(kinds) if kinds is not None else None, gate, position
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
        # What the catch-up handled may also be in the queue (published while it read).
        caught_up_to = await self._catch_up(subscriber)
        while True:
            batch = await subscriber.queue.get()
            early = subscriber.gate is not None and await subscriber.gate() is False
            taken = 1
            most = _GATED_MERGED if early else _MAX_MERGED
            while not subscriber.queue.empty() and len(batch) < most:
                batch.extend(subscriber.queue.get_nowait())
                taken += 1
            fresh = (
                batch
                if caught_up_to is None
                else [event for event in batch if event.seq > caught_up_to]
            )
            try:
                if fresh:
                    await self._hand(subscriber, fresh)
            finally:
                for _ in range(taken):
                    subscriber.queue.task_done()

    async def _catch_up(self, subscriber: _Subscriber) -> int | None:
        """Hand a durable subscriber what the log holds after its position; the last seq
        it has handled (None for a subscriber that is not durable)."""
        position = subscriber.position
        handled = 0
        try:
            if position is None:
                return None
            handled = await position.load()
            while backlog := await position.after(handled, subscriber.kinds):
                await self._hand(subscriber, backlog)
                handled = backlog[-1].seq
            if handled:
                log.info("bus consumer %s caught up to seq %d", subscriber.name, handled)
        except Exception:
            log.exception("bus consumer %s could not catch up from the log", subscriber.name)
        finally:
            subscriber.caught_up.set()
        return handled

    async def _hand(self, subscriber: _Subscriber, batch: list[StoredEvent]) -> None:
        """One delivery, then the durable position; a failure degrades the consumer and
        moves on (a poison event must not stop it at every start)."""
        try:
            await subscriber.handler(batch)
            subscriber.delivered += len(batch)
        except Exception as error:
            # A broken consumer degrades itself, never the bus (spec §7.7).
            subscriber.failures += 1
            _log_failure(error, "bus consumer %s failed on %d events", subscriber.name, len(batch))
        if subscriber.position is not None:
            try:
                await subscriber.position.save(max(event.seq for event in batch))
            except Exception as error:
                _log_failure(error, "bus consumer %s: position not recorded", subscriber.name)

    async def drain(self) -> None:
        """Wait until every subscriber has caught up with the log and handled everything
        published so far."""
        for subscriber in self._subscribers:
            await subscriber.caught_up.wait()
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


def _log_failure(error: Exception, message: str, *args: object) -> None:
    """A full disk is the machine's state, not a defect: one line, no traceback (the intake
    and the HTTP API report the episode itself); anything else with its traceback."""
    if is_disk_full(error):
        log.error(message + " (no space left for the store: %s)", *args, error)
    else:
        log.exception(message, *args)

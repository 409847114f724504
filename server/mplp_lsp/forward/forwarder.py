"""The forwarding loop of one sink: its queue → batches → transport → acknowledged,
dead-lettered or retried.

One batch is in flight at a time and batches leave in ``seq`` order, so the remote sees
each stream in order (a split batch sends its first half first). An entry leaves the outbox
only in the transaction that records why: delivered after a 2xx for it, or dead-lettered.
The acknowledgement is committed before the next batch is sent, so a crash at any instant
re-sends at most the one batch whose answer was not yet recorded; the remote deduplicates
it by event id and by the batch's Idempotency-Key. With an identity, the stream also reports
its outbox on its own schedule (:mod:`.report`).

What differs between kinds of remote (the body, the headers, what an answer means) is the
sink kind's (:mod:`.sinks`); each sink has its own cursor, counters and dead letters in the
one outbox (:mod:`.outbox`), so sinks forwarding side by side never wait for each other.
The transport is anything with ``send(batch) -> Reply`` that raises :class:`TransportError`
when no HTTP answer came; :mod:`.sender` is the aiohttp one. Nothing here imports aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from functools import partial

from mplp_lsp.forward import held, outbox
from mplp_lsp.forward.batching import STREAM_KEY_HEADER, Batch, BatchLimits, split
from mplp_lsp.forward.identity import StreamIdentity
from mplp_lsp.forward.outbox import Backlog, Entry
from mplp_lsp.forward.report import Reporter
from mplp_lsp.forward.retry import Action, RetryPolicy, parse_retry_after
from mplp_lsp.forward.sinks.kind import SinkKind, Stream, Verdict
from mplp_lsp.forward.transport import Reply, Transport, TransportError
from mplp_lsp.store.database import RECLAIM_MIN_PAGES, reclaim_free_pages, transaction
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.writer import StoreWriter

__all__ = ["Forwarder", "Reply", "Transport", "TransportError"]

log = logging.getLogger(__name__)

# Seconds between outbox checks when nothing woke the loop. Load-bearing: entries another
# process puts in (``mplp-lsp outbox requeue``) pass no bus, and are seen this way.
_RECHECK = 5.0


_Ahead = tuple[list[Entry], Batch | None]
"""The next pending entries and their encoded batch (None when there are none)."""


class Forwarder:
    """Drains one sink's queue in a store's outbox to its remote; see the module docstring."""

    def __init__(
        self,
        writer: StoreWriter,
        transport: Transport,
        kind: SinkKind,
        *,
        sink: str | None = None,
        budget_bytes: int,
        limits: BatchLimits | None = None,
        policy: RetryPolicy | None = None,
        rand: Callable[[], float] = random.random,
        reclaim_min_pages: int = RECLAIM_MIN_PAGES,
        identity: StreamIdentity | None = None,
        report_every: float = 30.0,
        remote: str | None = None,
    ) -> None:
        """``sink``: the sink's name in the store (the kind's name by default).
        ``remote``: the identity of the remote the transport sends to
        (:func:`~mplp_lsp.forward.remote.remote_identity`); the sink's queue becomes its
        queue (:mod:`.held`). None leaves the sink's remote as it is."""
        self._writer = writer
        self.kind = kind
        self.sink = sink or kind.name
        self._sink_id = 0  # known once started
        self._remote = remote
        self._reclaim_min_pages = reclaim_min_pages
        self._transport = transport
        self._budget_bytes = budget_bytes
        self.limits = limits or BatchLimits()
        self.policy = policy or RetryPolicy()
        self._rand = rand
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stream = Stream("")
        self.state = "stopped"  # stopped | idle | sending | waiting
        self.consecutive_failures = 0
        self.last_error: str | None = None
        # The last attempt made no connection at all (see TransportError.unreachable).
        self.unreachable = False
        self._retry_at: float | None = None
        self._turn = asyncio.Lock()  # batches and reports take turns on the wire
        self._reporter = (
            None
            if identity is None
            else Reporter(
                writer,
                transport,
                identity,
                every=report_every,
                turn=self._turn,
                headers=self._stream_headers,
            )
        )
        self._reporting: asyncio.Task[None] | None = None

    @property
    def stream(self) -> str:
        return self._stream.id

    @property
    def next_attempt_in(self) -> float | None:
        """Seconds until the next retry while waiting after a failure."""
        if self._retry_at is None:
            return None
        return max(0.0, self._retry_at - time.monotonic())

    async def start(self) -> None:
        """Enable queuing in the store, make the outbox this remote's queue, apply the budget,
        and start sending in the background."""
        self._sink_id, self._stream, released, others = await self._writer.run(self._enable)
        if released:
            log.warning(
                "forwarding: %d envelopes held for %s are queued for it again",
                released,
                self._remote,
            )
        for remote, count in sorted(others.items()):
            log.warning(
                "forwarding: %d envelopes queued for %s are held, not sent to %s"
                " (`mplp-lsp outbox held` lists them; `outbox requeue --held` sends them here,"
                " `outbox drop --held` forgets them)",
                count,
                remote,
                self._remote,
            )
        dropped = await self._writer.run(outbox.trim_to_budget)
        if dropped:
            log.warning("forwarding: %d envelopes over the disk budget were dropped", dropped)
        self.state = "idle"
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"forwarder {self.sink}")
        if self._reporter is not None:
            self._reporting = loop.create_task(
                self._reporter.run(self._stream.id, self._sink_id), name="report"
            )

    def _enable(self, conn: sqlite3.Connection) -> tuple[int, Stream, int, dict[str, int]]:
        """One transaction: an event accepted meanwhile is queued for one remote or the
        other, never left between them. The sink, the stream, how many entries held for
        this remote came back, and what stays held for others."""
        with transaction(conn):
            sink = outbox.ensure_sink(conn, self.sink)
            stream, key = outbox.enable(conn, sink, budget_bytes=self._budget_bytes)
            if self._remote is None:
                return sink, Stream(stream, key), 0, {}
            released = held.claim(conn, sink, self._remote).released
            return sink, Stream(stream, key), released, held.held_counts(conn)

    def wake(self) -> None:
        """New envelopes were committed; the loop looks at the outbox now."""
        self._wake.set()

    async def handle(self, _events: Sequence[StoredEvent]) -> None:
        """Bus consumer: committed events are already in the outbox; only wake the loop."""
        self.wake()

    async def close(self, grace: float = 0.5) -> None:
        """Stop sending; pending entries stay in the outbox for the next start."""
        tasks = [task for task in (self._task, self._reporting) if task is not None]
        self._task = self._reporting = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._transport.close(), grace)
        self.state = "stopped"
        self._retry_at = None

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        idle = True
        ahead: _Ahead = ([], None)
        while True:
            self._wake.clear()
            entries, batch = ahead if ahead[0] else await self._peek()
            ahead = ([], None)
            if entries and idle and len(entries) < self.limits.max_count and self.limits.linger:
                await asyncio.sleep(self.limits.linger)  # let a burst fill the batch
                entries, batch = await self._peek()
            if not entries:
                if not idle:  # the outbox was just drained: let the file shrink back
                    await self._reclaim()
                idle = True
                self.state = "idle"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), _RECHECK)
                continue
            idle = False
            try:
                ahead = await self._deliver(entries, batch)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                # The store failed (disk full, I/O error): keep the entries, try again later.
                log.exception("forwarding: store error; retrying")
                self.last_error = f"store error: {error}"
                await self._wait(self.policy.delay(self.consecutive_failures, rand=self._rand))
                self.consecutive_failures += 1

    async def _reclaim(self) -> None:
        try:
            await self._writer.read(partial(reclaim_free_pages, min_pages=self._reclaim_min_pages))
        except sqlite3.Error:  # only space is at stake; the next drain tries again
            log.warning("forwarding: could not give free pages back", exc_info=True)

    async def _peek(self, after_seq: int = 0) -> _Ahead:
        return await self._writer.read(partial(self._read, after_seq=after_seq))

    def _read(self, conn: sqlite3.Connection, *, after_seq: int) -> _Ahead:
        """The next entries, encoded as a batch with the backlog behind them (one read
        transaction, so the two agree)."""
        entries = outbox.peek(
            conn,
            self._sink_id,
            after_seq=after_seq,
            max_count=self.limits.max_count,
            max_bytes=self.limits.max_bytes,
        )
        if not entries:
            return entries, None
        backlog = outbox.backlog_after(conn, self._sink_id, entries[-1].seq)
        return entries, self._encode(entries, backlog)

    def _stream_headers(self) -> dict[str, str]:
        """What authenticates the stream's reports as its batches are: its write key."""
        return {STREAM_KEY_HEADER: self._stream.key}

    def _encode(self, entries: Sequence[Entry], backlog: Backlog | None = None) -> Batch:
        return self.kind.encode(self._stream, entries, backlog)

    async def _deliver(self, entries: list[Entry], batch: Batch | None) -> _Ahead:
        """Deliver or dead-letter ``entries``; returns the pending entries that follow them.

        Those are read, and encoded as the next batch, on the store's thread while this
        batch is on the wire, so the next batch is ready when this one is acknowledged. The
        acknowledgement itself is still committed before the next batch is sent (at most one
        batch is re-sent after a crash). An entry dropped by the overflow policy meanwhile
        may still be sent once: harmless.
        """
        following = asyncio.ensure_future(
            self._writer.read(partial(self._read, after_seq=entries[-1].seq))
        )
        try:
            await self._deliver_all(entries, batch)
        except BaseException:
            following.cancel()
            with contextlib.suppress(BaseException):
                await following
            raise
        return await following

    async def _deliver_all(self, entries: list[Entry], ready: Batch | None) -> None:
        """``ready``: ``entries`` already encoded, or None."""
        stack = [entries]
        while stack:
            part = stack.pop()
            batch = ready if ready is not None and part is entries else self._encode(part)
            verdict, reply = await self._send(batch)
            if verdict.action is Action.DELIVERED:
                if verdict.rejected:
                    self.last_error = verdict.reason
                    log.warning("forwarding to %s: %s", self.sink, verdict.reason)
                await self._writer.run(
                    partial(
                        outbox.ack, sink=self._sink_id, seqs=batch.seqs, rejected=verdict.rejected
                    )
                )
                if self._reporter is not None and batch.backlog is not None:
                    self._reporter.reported()
            elif verdict.action is Action.SPLIT:
                first, second = split(part)
                stack.append(second)
                stack.append(first)
            else:
                log.warning(
                    "forwarding to %s: %d envelopes dead-lettered (%s)",
                    self.sink,
                    len(part),
                    verdict.reason,
                )
                await self._writer.run(
                    partial(
                        outbox.dead_letter,
                        sink=self._sink_id,
                        seqs=batch.seqs,
                        status=reply.status,
                        reason=verdict.reason,
                    )
                )

    async def _send(self, batch: Batch) -> tuple[Verdict, Reply]:
        """Send until the answer is not "retry"; only the retry path waits."""
        while True:
            self.state = "sending"
            retry_after: float | None = None
            try:
                async with self._turn:
                    reply = await self._transport.send(batch)
            except TransportError as error:
                reason = str(error)
                self.unreachable = error.unreachable
            else:
                self.unreachable = False
                verdict = self.kind.classify(reply, batch)
                if verdict.action is not Action.RETRY:
                    self.consecutive_failures = 0
                    self._retry_at = None
                    return verdict, reply
                reason = verdict.reason
                retry_after = parse_retry_after(verdict.retry_after)
            self.last_error = reason
            if self.consecutive_failures == 0:
                log.warning("forwarding to %s: %s; retrying with backoff", self.sink, reason)
            else:
                log.debug(
                    "forwarding to %s: %s (attempt %d)",
                    self.sink,
                    reason,
                    self.consecutive_failures + 1,
                )
            await self._writer.run(
                partial(outbox.record_failure, sink=self._sink_id, message=reason)
            )
            delay = self.policy.delay(self.consecutive_failures, retry_after, rand=self._rand)
            self.consecutive_failures += 1
            await self._wait(delay)

    async def _wait(self, delay: float) -> None:
        self.state = "waiting"
        self._retry_at = time.monotonic() + delay
        try:
            await asyncio.sleep(delay)
        finally:
            self._retry_at = None

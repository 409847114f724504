"""The stream's report on its own schedule: how deep the outbox is, and who the stream is.

A batch tells the collector the backlog behind it, but a forwarder with nothing to send, or
whose batches cannot get through, sends no batch. So at start, and then whenever
``forwardReportS`` seconds have passed without an acknowledged batch, the forwarder posts
a small report (``POST /streams/report``, docs/forwarding.md): the outbox's whole depth
and the time its oldest entry was stored, with the stream's identity
(:mod:`.identity`). A report and a batch take turns on one lock (a report waits for the
answer to a batch in flight), so the collector always keeps the later of the two. A remote that
does not know reports (404) or refuses one costs nothing else: the next report comes a
period later.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from functools import partial

from mplp_lsp.forward import outbox
from mplp_lsp.forward.identity import StreamIdentity
from mplp_lsp.forward.outbox import Backlog
from mplp_lsp.forward.transport import Transport, TransportError
from mplp_lsp.store.writer import StoreWriter

__all__ = ["Reporter", "report_body"]

log = logging.getLogger(__name__)


def report_body(stream: str, backlog: Backlog, identity: StreamIdentity) -> bytes:
    return json.dumps(
        {
            "source": stream,
            "backlog": backlog.count,
            "backlog_oldest": backlog.oldest_at,
            "origin": identity.origin,
            "machine": identity.machine,
            "author_name": identity.author_name,
            "author_email": identity.author_email,
            "previous_stream": identity.previous_stream,
        }
    ).encode()


class Reporter:
    def __init__(
        self,
        writer: StoreWriter,
        transport: Transport,
        identity: StreamIdentity,
        *,
        every: float,
        turn: asyncio.Lock,
        headers: Callable[[], Mapping[str, str]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._writer = writer
        self._transport = transport
        self._identity = identity
        self._every = every
        self._turn = turn
        self._headers = headers
        self._clock = clock
        self._last: float | None = None  # when the collector last took a report of ours

    def reported(self) -> None:
        """A batch with its backlog was acknowledged: that was a report too."""
        self._last = self._clock()

    async def run(self, stream: str, sink: int) -> None:
        """Report ``stream``'s backlog in the queue of ``sink`` (the sink that sends to
        this remote) until cancelled."""
        while True:
            due = 0.0 if self._last is None else self._last + self._every - self._clock()
            if due > 0:
                await asyncio.sleep(due)
                continue
            if not await self._report(stream, sink):
                await asyncio.sleep(self._every)

    async def _report(self, stream: str, sink: int) -> bool:
        async with self._turn:
            backlog = await self._writer.read(partial(outbox.backlog_after, sink=sink, seq=0))
            body = report_body(stream, backlog, self._identity)
            try:
                reply = await self._transport.report(body, self._headers())
            except TransportError as error:  # the batches report failures, and retry
                log.debug("forwarding: the stream report did not get through: %s", error)
                return False
        if 200 <= reply.status < 300:
            self._last = self._clock()
            return True
        log.debug("forwarding: the remote answered %d to the stream report", reply.status)
        return False

"""One workspace's forwarding, as the workspace engine sees it: off, running or misconfigured,
and started again when the remote's settings change while the daemon runs.

Nothing is imported from the HTTP stack unless a remote is configured.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.bus import EventBus
from mplp_lsp.forward.forwarder import Forwarder
from mplp_lsp.forward.identity import StreamIdentity, identify
from mplp_lsp.forward.remote import (
    RemoteConfig,
    RemoteConfigError,
    batch_limits,
    remote_identity,
    resolve_remote,
    retry_policy,
)
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.salvage import read_report
from mplp_lsp.store.writer import StoreWriter

__all__ = ["Forwarding"]

log = logging.getLogger(__name__)

# A stopping workspace gives the forwarder this long; an unanswered request is abandoned
# and its batch stays in the outbox (sent again on the next start).
SHUTDOWN_GRACE = 0.5


class Forwarding:
    """The forwarder of one store, started again when its settings change (a new remote makes
    the outbox that remote's queue: :mod:`mplp_lsp.forward.held`)."""

    def __init__(
        self,
        remote: RemoteConfig | None = None,
        forwarder: Forwarder | None = None,
        problem: str | None = None,
    ) -> None:
        self.remote = remote
        self.forwarder = forwarder
        self.problem = problem
        self._subscribed = False
        self._closed = False
        self._turn = asyncio.Lock()  # one start or stop at a time

    @classmethod
    async def start(
        cls,
        writer: StoreWriter,
        bus: EventBus,
        settings: Settings,
        remote_url: str | None,
        root: Path | None = None,
    ) -> Forwarding:
        """``root``: the workspace, whose git author the stream reports (docs/forwarding.md)."""
        forwarding = cls()
        await forwarding.reconfigure(writer, bus, settings, remote_url, root)
        return forwarding

    async def reconfigure(
        self,
        writer: StoreWriter,
        bus: EventBus,
        settings: Settings,
        remote_url: str | None,
        root: Path | None = None,
    ) -> None:
        """Stop the forwarder (its pending entries stay) and start the one ``settings`` and
        ``remote_url`` configure now, if any."""
        async with self._turn:
            if self._closed:
                return
            await self._stop()
            self.remote = self.forwarder = self.problem = None
            try:
                remote = resolve_remote(settings, remote_url)
            except RemoteConfigError as error:
                log.error("forwarding is off: %s", error)
                self.problem = str(error)
                return
            if remote is None:
                return
            from mplp_lsp.forward.sender import HttpTransport

            forwarder = Forwarder(
                writer,
                HttpTransport(
                    remote.endpoint, remote.token, report_endpoint=remote.report_endpoint
                ),
                budget_bytes=remote.budget_bytes,
                limits=batch_limits(settings),
                policy=retry_policy(settings),
                identity=await _identity(writer, settings, root),
                report_every=settings.forward_report_s,
                remote=remote_identity(remote.url),
            )
            await forwarder.start()
            self.remote, self.forwarder = remote, forwarder
            if not self._subscribed:
                bus.subscribe("forward", self._handle)
                self._subscribed = True
            log.info("forwarding to %s", remote.url)

    async def _handle(self, events: Sequence[StoredEvent]) -> None:
        """Bus consumer: wakes whichever forwarder runs now."""
        if self.forwarder is not None:
            await self.forwarder.handle(events)

    def runtime(self) -> dict[str, Any]:
        """What only the running process knows; the counters are in the store."""
        forwarder = self.forwarder
        return {
            "remote": self.remote.url if self.remote else None,
            "state": forwarder.state if forwarder else ("misconfigured" if self.problem else "off"),
            "problem": self.problem,
            "consecutive_failures": forwarder.consecutive_failures if forwarder else 0,
            "next_attempt_in_s": forwarder.next_attempt_in if forwarder else None,
        }

    async def close(self) -> None:
        async with self._turn:
            self._closed = True
            await self._stop()

    async def _stop(self) -> None:
        if self.forwarder is not None:
            await self.forwarder.close(SHUTDOWN_GRACE)


async def _identity(writer: StoreWriter, settings: Settings, root: Path | None) -> StreamIdentity:
    salvage = await writer.read(read_report)
    previous = salvage.get("previous_stream") if salvage else None
    return await asyncio.to_thread(
        identify,
        writer.path,
        root,
        settings.git_author_email,
        previous if isinstance(previous, str) else None,
    )

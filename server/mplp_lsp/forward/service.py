"""One workspace's forwarding, as the workspace engine sees it: a forwarder per configured
sink (the collector, an OTLP receiver), each off, running or misconfigured, and started
again when the forwarding settings change while the daemon runs.

Nothing is imported from the HTTP stack unless a remote is configured.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.bus import EventBus
from mplp_lsp.forward import outbox
from mplp_lsp.forward.forwarder import Forwarder
from mplp_lsp.forward.identity import StreamIdentity, identify
from mplp_lsp.forward.outbox import COLLECTOR
from mplp_lsp.forward.remote import (
    RemoteConfig,
    batch_limits,
    configured_remotes,
    remote_identity,
    retry_policy,
)
from mplp_lsp.forward.sinks.collector import CollectorSink
from mplp_lsp.forward.sinks.kind import SinkKind
from mplp_lsp.forward.sinks.otlp import OTLP, OtlpSink, ProtobufMissing
from mplp_lsp.store.database import transaction
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.salvage import read_report
from mplp_lsp.store.writer import StoreWriter

__all__ = ["Forwarding"]

log = logging.getLogger(__name__)

# A stopping workspace gives the forwarder this long; an unanswered request is abandoned
# and its batch stays in the outbox (sent again on the next start).
SHUTDOWN_GRACE = 0.5


class Forwarding:
    """The forwarders of one store, one per configured sink, started again when their
    settings change (a new remote makes its sink's queue that remote's:
    :mod:`mplp_lsp.forward.held`). ``remote`` and ``forwarder`` are the collector's."""

    def __init__(self) -> None:
        self.remotes: dict[str, RemoteConfig] = {}
        self.forwarders: dict[str, Forwarder] = {}
        self.problems: dict[str, str] = {}
        self._subscribed = False
        self._closed = False
        self._turn = asyncio.Lock()  # one start or stop at a time

    @property
    def remote(self) -> RemoteConfig | None:
        return self.remotes.get(COLLECTOR)

    @property
    def forwarder(self) -> Forwarder | None:
        return self.forwarders.get(COLLECTOR)

    @property
    def problem(self) -> str | None:
        return self.problems.get(COLLECTOR)

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
        """Stop the forwarders (their pending entries stay) and start those ``settings`` and
        ``remote_url`` configure now; a sink whose configuration is refused is off, with
        its problem, and the others start."""
        async with self._turn:
            if self._closed:
                return
            await self._stop()
            self.forwarders = {}
            self.remotes, self.problems = configured_remotes(settings, remote_url)
            for name, problem in self.problems.items():
                log.error("forwarding is off for the %s sink: %s", name, problem)
            if not self.remotes:
                return
            identity = await _identity(writer, settings, root)
            built: dict[str, Forwarder] = {}
            for name, remote in self.remotes.items():
                try:
                    built[name] = _forwarder(writer, settings, remote, identity)
                except ProtobufMissing as error:
                    log.error("forwarding is off for the %s sink: %s", name, error)
                    self.problems[name] = str(error)
            for name in self.problems:
                self.remotes.pop(name, None)
            # One transaction for every sink: an event accepted while they start is queued
            # for all of them or for none, so each receives every envelope from then on.
            queues = {name: self.remotes[name].budget_bytes for name in built}
            await writer.run(partial(_enable_together, queues=queues))
            for name, forwarder in built.items():
                await forwarder.start()
                self.forwarders[name] = forwarder
                log.info("forwarding to %s (%s)", self.remotes[name].url, name)
            if self.forwarders and not self._subscribed:
                bus.subscribe("forward", self._handle)
                self._subscribed = True

    async def _handle(self, events: Sequence[StoredEvent]) -> None:
        """Bus consumer: wakes whichever forwarders run now."""
        for forwarder in list(self.forwarders.values()):
            await forwarder.handle(events)

    def runtime(self) -> dict[str, Any]:
        """What only the running process knows; the counters are in the store. The
        collector's at the top (as before sinks), every sink's under ``sinks``."""
        sinks = {name: self._sink_runtime(name) for name in {*self.forwarders, *self.problems}}
        return {**self._sink_runtime(COLLECTOR), "sinks": sinks}

    def _sink_runtime(self, name: str) -> dict[str, Any]:
        forwarder = self.forwarders.get(name)
        remote = self.remotes.get(name)
        problem = self.problems.get(name)
        return {
            "remote": remote.url if remote else None,
            "state": forwarder.state if forwarder else ("misconfigured" if problem else "off"),
            "problem": problem,
            "consecutive_failures": forwarder.consecutive_failures if forwarder else 0,
            "next_attempt_in_s": forwarder.next_attempt_in if forwarder else None,
        }

    async def close(self) -> None:
        async with self._turn:
            self._closed = True
            await self._stop()

    async def _stop(self) -> None:
        await asyncio.gather(
            *(forwarder.close(SHUTDOWN_GRACE) for forwarder in self.forwarders.values())
        )


def _enable_together(conn: sqlite3.Connection, *, queues: dict[str, int]) -> None:
    """Start queuing for every sink in ``queues`` (name: its disk budget) at one commit."""
    with transaction(conn):
        for name, budget in queues.items():
            outbox.enable(conn, outbox.ensure_sink(conn, name), budget_bytes=budget)


def _forwarder(
    writer: StoreWriter, settings: Settings, remote: RemoteConfig, identity: StreamIdentity
) -> Forwarder:
    """The forwarder of ``remote``'s sink, with its kind's encoder and classifier."""
    from mplp_lsp.forward.sender import HttpTransport

    kind: SinkKind
    if remote.kind == OTLP:
        options = remote.options
        send_host_name = options.get("sendHostName", settings.otlp_send_host_name)
        kind = OtlpSink(
            encoding=options.get("encoding", settings.otlp_encoding),
            compression=options.get("compression", settings.otlp_compression),
            origin=identity.origin,
            host_name=identity.machine if send_host_name else None,
        )
    else:
        kind = CollectorSink()
    endpoint = kind.endpoint(remote.url)
    report_endpoint = kind.report_endpoint(remote.url)
    return Forwarder(
        writer,
        HttpTransport(endpoint, remote.token, report_endpoint=report_endpoint),
        kind,
        sink=remote.name or kind.name,
        budget_bytes=remote.budget_bytes,
        limits=batch_limits(settings),
        policy=retry_policy(settings),
        identity=identity if report_endpoint is not None else None,
        report_every=settings.forward_report_s,
        # A sink's queue is for the URL it posts to (an OTLP path is not a collector's).
        remote=remote_identity(remote.url if remote.kind == COLLECTOR else endpoint),
    )


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

"""The PSG's front door: the operations the HTTP API, the LSP requests and consumers call.

Each write is one transaction on the store's writer thread (:mod:`mplp_lsp.graph`);
the events it caused were recorded as pending graph events by that same transaction
(:mod:`mplp_lsp.graph.pending`), and are then handed to the intake like any other event
(validated, stored, published on the bus, so forwarded too). Pending rows are cleared in the
next write's transaction, so a crash between
the two steps only means the events are submitted again at start-up (the intake drops the
ones it already has, by event id).

A ``ci_event`` committed by the intake reaches :meth:`PsgService.handle_ci` through the bus:
ingestion and PSG updates are decoupled (spec §6.4).

Reads run on their own thread and read-only connection, each in one transaction (one
consistent snapshot): in WAL mode they neither wait for the writer thread nor block it, so
reading a plan of thousands of steps does not hold up status changes.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from mplp_lsp.engine.intake import Intake, Outcome, Submission
from mplp_lsp.graph import (
    ci,
    confirms,
    contexts,
    pending,
    plans,
    steps,
    traces,
)
from mplp_lsp.graph.changes import WriteResult
from mplp_lsp.graph.integrity import Rejected
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.reader import ReaderConnection
from mplp_lsp.store.writer import StoreWriter

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["PsgService", "Rejected"]


class PsgService:
    def __init__(self, writer: StoreWriter, intake: Intake) -> None:
        self._writer = writer
        self._intake = intake
        self._published: list[str] = []  # pending events to clear in the next transaction
        self._reads = ThreadPoolExecutor(1, thread_name_prefix="mplp-psg-read")
        self._reader = ReaderConnection(writer)  # used on that thread only
        self._here = ReaderConnection(writer)  # used on the event loop's thread only

    async def start(self) -> None:
        """Submit events a previous run recorded but may not have handed to the intake."""
        leftover = await self._writer.read(pending.pending_events)
        if leftover:
            log.info("resubmitting %d pending graph events", len(leftover))
            await self._publish(leftover)

    async def close(self) -> None:
        if self._published:
            done, self._published = self._published, []
            await self._writer.run(lambda conn: pending.clear(conn, done))
        self._here.close()
        if self._reader.is_open:
            await asyncio.get_running_loop().run_in_executor(self._reads, self._reader.close)
        self._reads.shutdown(wait=True)

    async def write(self, change: Callable[[sqlite3.Connection], WriteResult]) -> WriteResult:
        """Run one graph write in its own transaction, then publish its events.

        Raises :class:`Rejected` (nothing changed) if the graph refuses the write.
        """
        done, self._published = self._published, []

        def transaction(conn: sqlite3.Connection) -> WriteResult:
            pending.clear(conn, done)
            return change(conn)

        try:
            outcome = await self._writer.run(transaction)
        except BaseException:
            self._published = done + self._published  # rolled back: still to clear
            raise
        await self._publish(outcome.events)
        return outcome

    async def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reads, self._read_snapshot, query)

    def read_now(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`read` on the calling thread (the event loop's), for a read of a few small
        queries that must answer at once however busy the process is.

        Each call into SQLite gives up the GIL and takes it back; on a thread of its own, a
        read waits for the busy event loop's thread at every take (up to the switch
        interval), and a status read of a dozen queries took 20-100 ms during a burst. A
        snapshot never waits for the writer (WAL).
        """
        return self._snapshot(self._here, query)

    def _read_snapshot(self, query: Callable[[sqlite3.Connection], T]) -> T:
        return self._snapshot(self._reader, query)

    @staticmethod
    def _snapshot(reader: ReaderConnection, query: Callable[[sqlite3.Connection], T]) -> T:
        conn = reader.get()
        conn.execute("BEGIN")
        try:
            return query(conn)
        finally:
            conn.execute("ROLLBACK")

    async def _publish(self, events: Sequence[dict[str, Any]]) -> None:
        if not events:
            return
        results = await self._intake.submit_many(
            [Submission(Kind(event["event_family"]), event, "psg") for event in events]
        )
        for event, result in zip(events, results, strict=True):
            if result.outcome is Outcome.REJECTED:  # a bug in a builder; logged by the intake
                log.error(
                    "the intake refused a PSG event %s: %s",
                    event["event_type"],
                    result.result.to_dict(),
                )
        self._published.extend(event["event_id"] for event in events)

    # --- operations (each a thin wrapper, so every front end calls the same code) ----------

    async def create_context(self, data: Any) -> WriteResult:
        return await self.write(lambda conn: contexts.create_context(conn, data))

    async def create_plan(self, data: Any) -> WriteResult:
        return await self.write(lambda conn: plans.create_plan(conn, data))

    async def set_plan_status(
        self, plan_id: str, status: Any, at: str | None = None
    ) -> WriteResult:
        return await self.write(lambda conn: plans.set_plan_status(conn, plan_id, status, at))

    async def set_step_status(
        self, plan_id: str, step_id: str, status: Any, at: str | None = None
    ) -> WriteResult:
        return await self.write(
            lambda conn: steps.set_step_status(conn, plan_id, step_id, status, at)
        )

    async def create_confirm(self, data: Any) -> WriteResult:
        return await self.write(lambda conn: confirms.create_confirm(conn, data))

    async def decide_confirm(self, confirm_id: str, decision: Any) -> WriteResult:
        return await self.write(lambda conn: confirms.decide_confirm(conn, confirm_id, decision))

    async def create_trace(self, data: Any) -> WriteResult:
        return await self.write(lambda conn: traces.create_trace(conn, data))

    async def set_trace_status(self, trace_id: str, status: Any) -> WriteResult:
        return await self.write(lambda conn: traces.set_trace_status(conn, trace_id, status))

    async def append_segments(self, trace_id: str, segments: Any) -> WriteResult:
        return await self.write(lambda conn: traces.append_segments(conn, trace_id, segments))

    async def edit_segment(self, trace_id: str, segment_id: str) -> WriteResult:
        return await self.write(lambda conn: traces.refuse_segment_edit(conn, trace_id, segment_id))

    async def get_context(self, context_id: str) -> dict[str, Any] | None:
        return await self.read(lambda conn: contexts.get_context(conn, context_id))

    async def get_plan(self, plan_id: str) -> dict[str, Any] | None:
        return await self.read(lambda conn: plans.get_plan(conn, plan_id))

    async def get_confirm(self, confirm_id: str) -> dict[str, Any] | None:
        return await self.read(lambda conn: confirms.get_confirm(conn, confirm_id))

    async def awaiting_confirms(self, plan_id: str) -> list[tuple[str, str]]:
        return await self.read(lambda conn: plans.awaiting_confirms(conn, plan_id))

    async def get_trace(self, trace_id: str) -> dict[str, Any] | None:
        return await self.read(lambda conn: traces.get_trace(conn, trace_id))

    async def handle_ci(self, events: Sequence[StoredEvent]) -> None:
        """Bus consumer for committed ci_events: pipeline nodes and their pipeline_stage."""
        runs = [
            ci.CiRun(event.event_id, event.timestamp, event.envelope["payload"])
            for event in events
            if event.kind == Kind.CI.value
        ]
        if runs:
            await self.write(lambda conn: ci.apply_ci(conn, runs))

"""Compaction: the store's owner keeps its store within the retention settings.

A pass, when the intake has been quiet for a while (a burst is never slowed by it):

1. compresses the file snapshots recorded since the last pass (stored as read, so a burst of
   saves does not wait for zlib);
2. removes the events retention cuts (:mod:`mplp_lsp.store.retention`: older than
   ``retentionDays``, or the oldest while the store is over ``storeMaxMb``), a slice per
   transaction, never one the outbox still has to send, and only below what the consumers
   have handled (it drains the bus first);
3. removes the snapshots of files last recorded before the oldest event kept, never one a
   drift finding needs (:func:`mplp_lsp.graph.snapshots.prune`);
4. gives the freed pages back to the file system and records what it did (meta
   ``retention.last``, shown by ``mplp-lsp status``).

The first pass runs once the daemon has been quiet for a few seconds after it started, the
next every ten minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from mplp_lsp.config.settings import Settings
from mplp_lsp.graph import snapshots
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import reclaim_free_pages
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.retention import Horizon, Policy, horizon, remove_events, store_bytes
from mplp_lsp.store.salvage import log_extent, note_highest_seq
from mplp_lsp.store.writer import StoreWriter

__all__ = ["LAST_KEY", "Compaction", "Pass", "plan", "policy_of"]

log = logging.getLogger(__name__)

LAST_KEY: Final = "retention.last"
INTERVAL_S: Final = 600.0
QUIET_S: Final = 5.0  # the intake idle this long before a pass, and between its slices
QUIET_LIMIT_S: Final = 120.0  # ... or this long at most under a steady stream
_COMPRESS_SLICE: Final = 200
_SIZE_ROUNDS: Final = 4  # a size cut is an estimate: measure and cut again, this many times
_MIB: Final = 2**20

Quiet = Callable[[float, float], Awaitable[object]]


def policy_of(settings: Settings) -> Policy:
    return Policy(settings.retention_days, settings.store_max_mb * _MIB)


@dataclass(frozen=True, slots=True)
class Pass:
    """What one compaction pass did."""

    at: str
    events_removed: int
    snapshots_removed: int
    snapshots_compressed: int
    bytes_before: int
    bytes_after: int
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def plan(conn: sqlite3.Connection, policy: Policy, now: datetime | None = None) -> dict[str, Any]:
    """What retention holds to and would do now, and what the last pass did (for status)."""
    count, stored, waiting = snapshots.totals(conn)
    cut = horizon(conn, policy, now or datetime.now(UTC), other_bytes=stored)
    last = EventLog(conn).get_meta(LAST_KEY)
    return {
        "max_age_days": policy.max_age_days,
        "max_bytes": policy.max_bytes,
        "store_bytes": store_bytes(conn),
        "removable_events": cut.removable,
        "reason": cut.reason,
        "oldest_kept": cut.oldest_kept,
        "snapshots": count,
        "snapshot_bytes": stored,
        "snapshots_to_compress": waiting,
        "last_pass": json.loads(last) if last else None,
    }


class Compaction:
    def __init__(
        self,
        writer: StoreWriter,
        policy: Callable[[], Policy],
        quiet: Quiet,
        drain: Callable[[], Awaitable[None]],
    ) -> None:
        self._writer = writer
        self._policy = policy
        self._quiet = quiet
        self._drain = drain
        self._task: asyncio.Task[None] | None = None
        # Set by close: a store write the pass awaits completes even when cancelled (the
        # writer commits what it began), so the pass also stops at this flag.
        self._closing = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="compaction")

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        wait = QUIET_S  # the owner's own start-up first: a CLI process that stores one event
        while not await self._closed_within(wait):
            await self._quiet(QUIET_S, QUIET_LIMIT_S)
            if self._closing.is_set():
                return
            try:
                done = await self.run_once(stop=self._closing)
                if done.events_removed or done.snapshots_removed or done.snapshots_compressed:
                    log.info("compaction: %s", done.to_json())
            except sqlite3.Error as error:
                log.warning("compaction stopped: %s", error)
            wait = INTERVAL_S

    async def _closed_within(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)
        return self._closing.is_set()

    async def run_once(
        self, now: datetime | None = None, *, stop: asyncio.Event | None = None
    ) -> Pass:
        """One pass (see the module docstring); ``now`` is the time retention's age counts
        from (the clock when None). It ends early, between two slices, once ``stop`` is set."""
        stop = stop or asyncio.Event()
        writer = self._writer
        before = await writer.read(store_bytes)
        compressed = 0
        while not stop.is_set() and (
            found := await writer.run(lambda c: snapshots.compress(c, _COMPRESS_SLICE))
        ):
            compressed += found
            await self._quiet(QUIET_S / 5, QUIET_LIMIT_S)
        policy = self._policy()
        await self._drain()  # the consumers have handled everything stored up to here
        upto = await writer.read(_last_seq)
        removed = pruned = 0
        reason = None
        for _ in range(_SIZE_ROUNDS):
            await writer.read(reclaim_free_pages)
            cut: Horizon = await writer.read(lambda c: _horizon(c, policy, now, upto))
            if cut.reason is None:
                break
            reason = reason or cut.reason
            below = cut.seq
            while not stop.is_set() and (
                gone := await writer.run(partial(remove_events, below=below))
            ):
                removed += gone
                await self._quiet(QUIET_S / 5, QUIET_LIMIT_S)
            pruned += await writer.run(partial(snapshots.prune, below_seq=below))
            if cut.reason != "size":
                break
        await writer.read(lambda c: reclaim_free_pages(c, min_pages=1))
        if removed:  # what a salvage counts its loss against (mplp_lsp.store.salvage)
            await writer.read(lambda c: note_highest_seq(writer.path, *log_extent(c)))
        after = await writer.read(store_bytes)
        done = Pass(utc_timestamp(), removed, pruned, compressed, before, after, reason)
        await writer.run(lambda c: EventLog(c).set_meta(LAST_KEY, json.dumps(done.to_json())))
        return done


def _horizon(conn: sqlite3.Connection, policy: Policy, now: datetime | None, upto: int) -> Horizon:
    stored = snapshots.totals(conn)[1]
    return horizon(conn, policy, now or datetime.now(UTC), other_bytes=stored, upto=upto)


def _last_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

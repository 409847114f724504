"""An instance's PostgreSQL over time: reached in the background, watched, renewed on return.

An instance serves HTTP from its first second, whether or not its database is up. Until the
database has been reached and migrated, every route but ``/health`` and ``/ready`` answers
503 with ``Retry-After`` (a forwarder retries, a balancer sends the request elsewhere);
connection attempts repeat every :data:`RETRY_EVERY_S`. Only a configuration error (a wrong
password, no such database, no right to create the tables) ends the process.

Readiness is watched by a probe on a connection of its own: every :data:`PROBE_EVERY_S` it
asks for a transaction id, which takes a database that accepts writes (not a standby, not
read-only, able to log its commit), within :data:`PROBE_TIMEOUT_S`. So ``/ready`` turns 503
within ``PROBE_EVERY_S + PROBE_TIMEOUT_S`` of the database going away, and requests are
refused at once instead of waiting. When the probe succeeds again the pool is replaced
by a new one: the old one's reconnection backoff (it doubles to a minute and more) would
otherwise keep the instance refusing long after the database is back.

A request waits at most the pool's ``timeout`` for a connection (503 then). Once it has
one, its work is abandoned (503) as soon as the probe finds the database gone, or after
:data:`WORK_LIMIT_S` in any case (a lock held forever elsewhere); the abandoned work
finishes or fails in the background, where it cannot hold the request up. Work on a database
that is only slow (a loaded machine) is not cut short: a forwarder would send it again and
again, each try as slow as the last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from mplp_lsp.collector.pg_connect import PgOptions, is_permanent
from mplp_lsp.collector.pg_schema import migrate

__all__ = ["PROBE_EVERY_S", "PROBE_TIMEOUT_S", "Database", "DatabaseUnavailable"]

log = logging.getLogger(__name__)
T = TypeVar("T")

PROBE_EVERY_S: Final = 0.5
PROBE_TIMEOUT_S: Final = 1.0
RETRY_EVERY_S: Final = 1.0
# Below a forwarder's own request timeout (30 s), so the forwarder gets the collector's 503.
WORK_LIMIT_S: Final = 25.0
# An outage at least this long renews the pool when the database returns; a shorter one
# (a probe that came late) leaves it: its first reconnection attempts are immediate.
RENEW_AFTER_S: Final = 1.0
_LOG_AGAIN_S: Final = 60.0  # a database error that goes on is logged once a minute
_CLOSE_OLD_POOL_S: Final = 5.0
Pool = AsyncConnectionPool[AsyncConnection[Any]]


class DatabaseUnavailable(Exception):
    """The database cannot be used now (not reached yet, gone, or too slow): answer 503."""


Opened = Callable[[Pool, str], Awaitable[None]]


class Database:
    """Owns the pool of one instance; ``opened(pool, graph_id)`` is called once, after the
    migrations."""

    def __init__(self, options: PgOptions, opened: Opened | None = None) -> None:
        self.options = options
        self._opened = opened
        self.pool: Pool | None = None
        self.graph_id: str | None = None
        self.ready = False
        self.problem: str | None = "not reached yet"
        self.checked_at: float | None = None  # time.time() of the last probe
        self._lost_at: float | None = None  # time.monotonic() the probe first failed
        self._logged_failure: float | None = None  # time.monotonic() of the last line
        self._probe_conn: AsyncConnection[Any] | None = None
        self._gone = asyncio.Event()  # set while the probe finds the database unavailable
        self._task: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[Any]] = set()

    # -- lifecycle -------------------------------------------------------------------------

    async def first_contact(self) -> None:
        """Try once before serving: a configuration error raises; anything else is waited
        out in the background."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S * 3):
                conn = await self.options.connect()
        except (psycopg.Error, OSError, TimeoutError) as error:
            if is_permanent(error):
                raise
            log.warning("the database cannot be reached yet (%s); waiting for it", _first(error))
            return
        await conn.close()

    def set_opened(self, opened: Opened) -> None:
        self._opened = opened

    def start(self) -> None:
        """Reach, migrate and then watch the database until :meth:`close`."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="database")

    async def running(self) -> None:
        """Returns when :meth:`close` stops the watch; raises on a configuration error."""
        assert self._task is not None, "start() first"
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._task)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._probe_conn is not None:
            with contextlib.suppress(Exception):
                await self._probe_conn.close()
        if self.pool is not None:
            await self.pool.close(timeout=_CLOSE_OLD_POOL_S)
        for task in list(self._stopping):
            with contextlib.suppress(Exception):
                await task

    async def _run(self) -> None:
        await self._set_up()
        while True:
            await self._probe()
            await asyncio.sleep(PROBE_EVERY_S)

    async def _set_up(self) -> None:
        """Migrate (once reachable) and open the pool."""
        reported = None
        while True:
            try:
                conn = await asyncio.wait_for(self.options.connect(), PROBE_TIMEOUT_S * 3)
                async with conn:
                    await migrate(conn)  # no time limit: a large migration takes its time
                    cursor = await conn.execute(
                        "SELECT value FROM team_meta WHERE name = 'graph_id'"
                    )
                    row = await cursor.fetchone()
                break
            except (psycopg.Error, OSError, TimeoutError) as error:
                if is_permanent(error):
                    log.error("the database refuses this collector: %s", _first(error))
                    raise
                if _first(error) != reported:
                    reported = _first(error)
                    log.warning("waiting for the database: %s", reported)
                self.problem = _first(error)
                await asyncio.sleep(RETRY_EVERY_S)
        assert row is not None  # written by the first migration
        self.graph_id = str(row[0])
        self.pool = await self._new_pool()
        if self._opened is not None:
            await self._opened(self.pool, self.graph_id)
        log.info("the database is reached and up to date")

    async def _new_pool(self) -> Pool:
        pool = self.options.pool()
        await pool.open(wait=False)
        return pool

    # -- readiness -------------------------------------------------------------------------

    async def _probe(self) -> None:
        # In a task of its own: a query cancelled mid-way makes psycopg ask the server to
        # cancel it and wait for that (seconds, or for ever on a silent link), so a late
        # probe is left to end in the background rather than awaited.
        probe = asyncio.ensure_future(self._probe_once())
        await asyncio.wait({probe}, timeout=PROBE_TIMEOUT_S)
        if not probe.done():
            probe.cancel()
            self._background(_quietly(probe))
            self._lost("no answer")  # and its connection is closed once the probe lets go
        elif (error := probe.exception()) is not None:
            if not isinstance(error, psycopg.Error | OSError):
                raise error
            self._lost(_first(error))
        else:
            await self._back()
        self.checked_at = time.time()

    async def _probe_once(self) -> None:
        if self._probe_conn is None or self._probe_conn.closed:
            self._probe_conn = await self.options.connect()
        await self._probe_conn.execute("SELECT pg_current_xact_id()")

    def _lost(self, problem: str) -> None:
        if self.ready:
            log.warning("the database is unavailable (%s); refusing with 503", problem)
        if self._lost_at is None:
            self._lost_at = time.monotonic()
        self._gone.set()
        self.ready = False
        self.problem = problem
        conn, self._probe_conn = self._probe_conn, None
        if conn is not None:
            self._background(conn.close())

    async def _back(self) -> None:
        if self.ready:
            return
        lost_at, self._lost_at = self._lost_at, None
        if lost_at is not None and self.pool is not None:
            if time.monotonic() - lost_at >= RENEW_AFTER_S:
                # A fresh pool connects now, without the old one's reconnection backoff.
                old, self.pool = self.pool, await self._new_pool()
                self._background(old.close(timeout=_CLOSE_OLD_POOL_S))
            log.warning("the database is available again")
        self._gone.clear()
        self.ready = True
        self.problem = None
        self._logged_failure = None

    def _background(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._stopping.add(task)
        task.add_done_callback(_finished(self._stopping))

    # -- requests --------------------------------------------------------------------------

    def current_pool(self) -> Pool:
        """The pool, if the database is usable now; else :class:`DatabaseUnavailable`."""
        if not self.ready or self.pool is None:
            raise DatabaseUnavailable(self.problem or "not ready")
        return self.pool

    async def bounded(self, work: Awaitable[T]) -> T:
        """``work``'s result, or :class:`DatabaseUnavailable` as soon as the database is
        found gone, or after :data:`WORK_LIMIT_S` (the work is cancelled in the background)."""
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait(
                {task, gone}, timeout=WORK_LIMIT_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            gone.cancel()
        if task.done():
            return task.result()
        task.cancel()
        self._background(_quietly(task))
        if self._gone.is_set():
            raise DatabaseUnavailable(self.problem or "the database is unavailable")
        raise DatabaseUnavailable(f"no answer within {WORK_LIMIT_S:g} s")

    def request_failed(self, error: BaseException) -> None:
        """A request met a database error: the first of an outage is logged, and then one
        a minute while they go on (not one per request)."""
        now = time.monotonic()
        if self._logged_failure is None or now - self._logged_failure >= _LOG_AGAIN_S:
            self._logged_failure = now
            log.warning("database error: %s", _first(error))


async def _quietly(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(BaseException):
        await task


def _finished(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failed close is not worth a traceback

    return done


def _first(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__

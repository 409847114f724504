"""The single writer: every write to the workspace database goes through one thread.

SQLite allows one writer at a time and its connection objects must stay on the thread
that made them, so :class:`StoreWriter` owns one connection on one dedicated thread
(``mplp-store``) and the event loop only ever waits on futures. Nothing here blocks the
loop.

Group commit
------------
A durable commit costs an fsync (see :mod:`mplp_lsp.store.database`), so appends are
merged: while a transaction is being committed, new :meth:`StoreWriter.append` calls
queue up, and the next transaction takes all of them (up to ``max_batch`` events; one
call's events are never split, so each call stays atomic). A call that finds the writer
idle is dispatched at the end of the current event-loop iteration, so calls made in the
same iteration share its transaction, and a lone sequential caller never waits for a
timer. Only when the previous group had more callers than are queued now (producers
under load that have not all come back yet) does the writer wait, for at most
``linger`` seconds, until that many callers or ``max_batch`` events are queued; the
next group then recalibrates what "that many" is.

Each caller receives only its own results, and only after ``COMMIT`` returned: the
accepted events are on disk by the time ``append`` returns. If the transaction fails
(disk full, I/O error, a constraint), it is rolled back and every caller of that group
gets the exception; nothing of the group is stored. An envelope that cannot be
serialised fails only its own caller, before the shared transaction starts.

Damage while open
-----------------
If SQLite reports the file damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) during a write
or a read, the writer thread closes its connection, salvages the store as a start would
(:func:`~mplp_lsp.store.salvage.ensure_usable`: the damaged file moved aside, every
readable row copied into a new one, the loss counted, status "degraded"), reopens it and
runs the failed operation once more. A failed append group is retried as a whole, so its
callers are not told of the damage at all unless the retry fails too. ``generation`` moves
with each salvage, so read-only connections beside the writer reopen
(:class:`~mplp_lsp.store.reader.ReaderConnection`).

Cancellation
------------
Cancelling a caller never disturbs the others. A call cancelled while still queued is
dropped and none of its events are written. A call cancelled after its group was handed
to the writer thread may still be committed: "accepted means durable" is a promise made
only to callers that receive the result, and a cancelled caller has to treat its events
as "unknown" (re-submitting them is safe, the store deduplicates them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import sqlite3
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import connect, transaction
from mplp_lsp.store.events import EventLog, NewEvent, PreparedEvent, StoredEvent, prepare_events
from mplp_lsp.store.salvage import ensure_usable, log_extent, note_highest_seq

__all__ = ["StoreWriter"]

T = TypeVar("T")
log = logging.getLogger(__name__)

_Outcome = list[StoredEvent | None] | BaseException
_DAMAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


def _is_damage(error: BaseException) -> bool:
    """Whether ``error`` is SQLite saying the database file itself is damaged."""
    code = getattr(error, "sqlite_errorcode", None)
    return (
        isinstance(error, sqlite3.DatabaseError)
        and code is not None
        and code & 0xFF in (_DAMAGE_CODES)
    )


class _Request:
    __slots__ = ("events", "future")

    def __init__(
        self, events: tuple[NewEvent, ...], future: asyncio.Future[list[StoredEvent | None]]
    ) -> None:
        self.events = events
        self.future = future


class StoreWriter:
    """Owns the workspace database connection and its thread; see the module docstring.

    ``commits`` counts committed transactions (append groups and :meth:`run` calls);
    ``failed_transactions`` counts those that failed (after a salvage's retry, if any).
    """

    def __init__(self, path: Path, *, max_batch: int = 256, linger: float = 0.002) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if linger < 0:
            raise ValueError(f"linger must be >= 0, got {linger}")
        self.path = path
        self.max_batch = max_batch
        self.linger = linger
        self.commits = 0
        self.failed_transactions = 0
        self.generation = 0  # bumped by each salvage while open (see the module docstring)
        self._state: Literal["new", "starting", "open", "closing", "closed"] = "new"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: deque[_Request] = deque()
        self._pending_events = 0
        self._in_flight = False
        self._expected_callers = 1
        self._linger_timer: asyncio.TimerHandle | None = None
        self._soon: asyncio.Handle | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing: asyncio.Task[None] | None = None
        # Touched only on the writer thread.
        self._conn: sqlite3.Connection | None = None
        self._log: EventLog | None = None

    @property
    def pending_events(self) -> int:
        """Events handed to :meth:`append` and not yet resolved (queued or being committed)."""
        return self._pending_events

    @property
    def is_open(self) -> bool:
        return self._state == "open"

    async def start(self) -> None:
        """Start the writer thread and open (create, migrate) the database on it."""
        if self._state != "new":
            raise RuntimeError(f"StoreWriter for {self.path} cannot start: it is {self._state}")
        self._state = "starting"
        self._loop = asyncio.get_running_loop()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="mplp-store"
        )
        try:
            await self._loop.run_in_executor(self._executor, self._open)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            self._state = "new"
            raise
        self._state = "open"

    async def append(self, events: Sequence[NewEvent]) -> list[StoredEvent | None]:
        """Store ``events`` durably; one result per event, ``None`` for a duplicate.

        Returns only after the transaction holding these events committed.
        """
        if self._state != "open":
            raise RuntimeError(self._unavailable("append to"))
        if not events:
            return []
        assert self._loop is not None
        request = _Request(tuple(events), self._loop.create_future())
        self._pending.append(request)
        self._pending_events += len(request.events)
        self._idle.clear()
        self._schedule()
        return await request.future

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the writer thread inside ``BEGIN IMMEDIATE``/``COMMIT``.

        An exception from ``fn`` rolls the transaction back and is re-raised here. If this
        await is cancelled after ``fn`` started, ``fn`` still completes and commits.
        """
        executor = self._usable_executor("run on")
        assert self._loop is not None
        return await self._loop.run_in_executor(executor, self._run_in_transaction, fn)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the writer thread without opening a transaction (for reads)."""
        executor = self._usable_executor("read from")
        assert self._loop is not None
        return await self._loop.run_in_executor(executor, self._run_plain, fn)

    async def close(self) -> None:
        """Commit every queued append, then close the database. Safe to call repeatedly."""
        if self._closing is None:
            if self._state in ("new", "closed"):
                self._state = "closed"
                return
            if self._state == "starting":
                raise RuntimeError(f"StoreWriter for {self.path} is still starting")
            self._state = "closing"
            self._closing = asyncio.get_running_loop().create_task(self._shutdown())
        # Shielded: a cancelled close() must not leave the store half shut down, and every
        # close() call returns only once the connection is closed.
        await asyncio.shield(self._closing)

    # -- event loop side -------------------------------------------------------------------

    def _unavailable(self, action: str) -> str:
        if self._state in ("closing", "closed"):
            return f"cannot {action} StoreWriter for {self.path}: it is closed"
        return f"cannot {action} StoreWriter for {self.path}: call start() first"

    def _usable_executor(self, action: str) -> concurrent.futures.ThreadPoolExecutor:
        # run()/read() stay usable while close() drains, so consumers can finish their work.
        if self._state not in ("open", "closing") or self._executor is None:
            raise RuntimeError(self._unavailable(action))
        return self._executor

    def _schedule(self, *, waited: bool = False) -> None:
        """Arrange the next dispatch; ``waited``: the queued calls sat out a whole commit."""
        if self._in_flight or self._soon is not None:
            return  # the running commit, or the dispatch already queued, will take them
        if (
            waited
            or self.linger == 0
            or self._state != "open"
            or self._pending_events >= self.max_batch
            or len(self._pending) >= self._expected_callers
        ):
            # Deferred to the end of this loop iteration, not run inline: callers woken by
            # the last commit re-append in this iteration and join the same group.
            assert self._loop is not None
            self._soon = self._loop.call_soon(self._dispatch)
        elif self._linger_timer is None:
            assert self._loop is not None
            self._linger_timer = self._loop.call_later(self.linger, self._dispatch)

    def _dispatch(self) -> None:
        for handle in (self._soon, self._linger_timer):
            if handle is not None:
                handle.cancel()
        self._soon = self._linger_timer = None
        if self._in_flight:
            return
        group: list[_Request] = []
        size = 0
        while self._pending:
            request = self._pending[0]
            if request.future.done():  # cancelled while queued: never written
                self._pending.popleft()
                self._pending_events -= len(request.events)
                continue
            if group and size + len(request.events) > self.max_batch:
                break
            self._pending.popleft()
            group.append(request)
            size += len(request.events)
        if not group:
            self._idle.set()
            return
        self._expected_callers = len(group)
        self._in_flight = True
        assert self._executor is not None and self._loop is not None
        loop = self._loop
        job: concurrent.futures.Future[list[_Outcome]]
        try:
            job = self._executor.submit(self._commit_group, group)
        except BaseException as error:  # executor unusable: fail this group, keep the loop sane
            job = concurrent.futures.Future()
            job.set_exception(error)

        def on_thread_done(done: concurrent.futures.Future[list[_Outcome]]) -> None:
            # RuntimeError: the loop is closed, so nobody is waiting for these results.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._group_done, group, done)

        job.add_done_callback(on_thread_done)

    def _group_done(
        self, group: list[_Request], done: concurrent.futures.Future[list[_Outcome]]
    ) -> None:
        self._in_flight = False
        try:
            error = done.exception()
            outcomes: list[_Outcome] = [error] * len(group) if error is not None else done.result()
            for request, outcome in zip(group, outcomes, strict=True):
                self._pending_events -= len(request.events)
                if request.future.done():  # the caller was cancelled; the others still count
                    continue
                if isinstance(outcome, BaseException):
                    request.future.set_exception(outcome)
                else:
                    request.future.set_result(outcome)
        finally:
            if self._pending:
                self._schedule(waited=True)
            else:
                self._idle.set()

    async def _shutdown(self) -> None:
        if self._pending:
            self._schedule(waited=True)
        await self._idle.wait()
        self._state = "closed"
        assert self._loop is not None and self._executor is not None
        try:
            await self._loop.run_in_executor(self._executor, self._close_connection)
        finally:
            self._executor.shutdown(wait=False)

    # -- writer thread side ----------------------------------------------------------------

    def _open(self) -> None:
        self._conn = connect(self.path)
        self._log = EventLog(self._conn)

    def _close_connection(self) -> None:
        if self._conn is not None:
            conn, self._conn, self._log = self._conn, None, None
            with contextlib.suppress(sqlite3.Error):  # a damaged file may not close cleanly
                # What a later salvage counts its loss against (and what tells an emptied
                # file from a new store).
                note_highest_seq(self.path, *log_extent(conn))
                conn.close()

    def _connection(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            if self._state == "closed":
                raise RuntimeError(f"StoreWriter for {self.path} is closed")
            self._open()  # a reopen after a salvage failed: try again
            conn = self._conn
            assert conn is not None
        if conn.in_transaction:
            # Only a read() callback that began a transaction and left it open gets here.
            log.warning("rolling back a transaction left open on %s", self.path)
            conn.execute("ROLLBACK")
        return conn

    def _commit_group(self, group: list[_Request]) -> list[_Outcome]:
        outcomes: list[_Outcome] = []
        prepared: list[tuple[int, list[PreparedEvent]]] = []
        for index, request in enumerate(group):
            try:
                prepared.append((index, prepare_events(request.events)))
                outcomes.append([])
            except Exception as error:  # this caller's data alone: keep it out of the group
                outcomes.append(error)
        if not prepared:
            return outcomes

        def append_all() -> list[tuple[int, list[StoredEvent | None]]]:
            conn = self._connection()
            assert self._log is not None
            # The callers' events as one batch: one statement for the whole group (many
            # callers append a single event), in call order, so the first of two equal
            # events is the one stored, as with separate appends.
            items = [item for _, batch in prepared for item in batch]
            with transaction(conn):
                results = self._log.append_prepared(items, received_at=utc_timestamp())
            shares: list[tuple[int, list[StoredEvent | None]]] = []
            start = 0
            for index, batch in prepared:
                shares.append((index, results[start : start + len(batch)]))
                start += len(batch)
            return shares

        try:
            stored = self._recovering(append_all)
        except Exception as error:
            self.failed_transactions += 1
            for index, _ in prepared:
                outcomes[index] = error
        else:
            self.commits += 1
            for index, results in stored:
                outcomes[index] = results
        return outcomes

    def _recovering(self, operation: Callable[[], T]) -> T:
        """Run ``operation``; if it finds the store damaged, salvage it and run it once more."""
        try:
            return operation()
        except sqlite3.DatabaseError as error:
            if not _is_damage(error) or not self._salvage(error):
                raise
        return operation()

    def _salvage(self, error: sqlite3.DatabaseError) -> bool:
        """Move the damaged store aside, salvage it and reopen; whether anything was done."""
        log.error("the store %s reported damage while open (%s); salvaging it", self.path, error)
        self._close_connection()
        try:
            report = ensure_usable(self.path)
        finally:
            self._open()
        if report is None:  # SQLite's own check finds the file sound: nothing to retry for
            return False
        self.generation += 1
        return True

    def _run_in_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            with transaction(self._connection()) as conn:
                return fn(conn)

        try:
            result = self._recovering(run)
        except BaseException:
            self.failed_transactions += 1
            raise
        self.commits += 1
        return result

    def _run_plain(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            conn = self._connection()
            try:
                return fn(conn)
            finally:
                if conn.in_transaction:
                    log.warning(
                        "read() callback left a transaction open on %s; rolled back", self.path
                    )
                    conn.execute("ROLLBACK")

        return self._recovering(run)

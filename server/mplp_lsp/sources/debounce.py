"""Per-path debouncing and coalescing of file activity into settled changes.

Editors and watchers report saves, creates, deletes and renames, often several times
for one real change. :class:`Coalescer` folds them into at most one :class:`Settled`
per path and window (the rules are in ``docs/coalescing.md``); :class:`Debouncer`
adds the asyncio timing and hands due changes to a consumer in batches.

Every emitted change is expressed against the state the consumer had when the window
opened, and the paths claimed by pending windows never overlap, so batches can be
applied in any order relative to each other without changing which paths exist.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal

__all__ = [
    "EDITOR",
    "PAIRED",
    "WATCHER",
    "Change",
    "Coalescer",
    "Debouncer",
    "Observation",
    "Settled",
]

logger = logging.getLogger(__name__)

EDITOR: Final = "editor"
WATCHER: Final = "watcher"
WILL_SAVE: Final = "will_save"  # the editor is about to save (LSP willSave): a save began
# Settled.extra key of a rename that pairs a watcher's delete with its create: a guess, which
# the disk must confirm (sources/disk_state.py)
PAIRED: Final = "paired"

_EMPTY: Final[Mapping[str, object]] = MappingProxyType({})
_STEP_LIMIT: Final = 1_000  # windows the timer settles in one step: about 6 ms

_Kind = Literal["create", "delete"]


class Change(StrEnum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"
    RENAMED = "renamed"


@dataclass(frozen=True, slots=True)
class Observation:
    """One raw thing that happened to a path.

    ``at`` must come from the same clock as the debouncer's (``time.monotonic`` by
    default). For ``RENAMED``, ``path`` is the new path and ``previous_path`` the old.
    ``extra["content_key"]`` (a string such as a hash) lets watcher deletes and creates
    of the same content pair up into a rename.
    """

    path: str
    change: Change
    at: float
    previous_path: str | None = None
    origin: str = EDITOR
    extra: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Settled:
    """The net change of one window; becomes one ``file_update_event``."""

    path: str
    change: Change
    previous_path: str | None
    first_at: float
    last_at: float
    count: int
    extra: Mapping[str, object]


class _Window:
    """Mutable pending state of one thing that changed.

    ``old`` is the path it had when the window opened (``None`` if it did not exist),
    ``new`` the path it has now (``None`` if it is gone). ``displaced`` means ``new``
    also held an older file before the window, which the thing has overwritten.
    """

    __slots__ = (
        "alive",
        "candidate",
        "content_key",
        "count",
        "displaced",
        "due",
        "editor_saw",
        "extra",
        "first_at",
        "last_at",
        "new",
        "old",
        "save_begun",
    )

    def __init__(self, old: str | None, at: float) -> None:
        self.old = old
        self.new: str | None = None  # placed by the caller (_move_in) or left gone
        self.first_at = at
        self.last_at = at
        self.count = 0
        self.extra: dict[str, object] | None = None
        self.displaced = False
        self.candidate: _Kind | None = None
        self.content_key: str | None = None
        self.due = math.inf
        self.alive = True
        self.editor_saw = False
        self.save_begun = False

    @property
    def key(self) -> str:
        key = self.new if self.new is not None else self.old
        assert key is not None  # a window that is neither here nor there is dropped at once
        return key

    @property
    def moved(self) -> bool:
        return self.old is not None and self.new is not None and self.old != self.new


def _settled(w: _Window) -> Settled:
    old, new = w.old, w.new
    previous: str | None = None
    if new is None:
        assert old is not None
        path, change = old, Change.DELETED
    elif old is None:
        path, change = new, Change.CREATED
    elif old == new:
        path, change = new, Change.MODIFIED
    else:
        path, change, previous = new, Change.RENAMED, old
    extra = MappingProxyType(w.extra) if w.extra else _EMPTY
    return Settled(path, change, previous, w.first_at, w.last_at, w.count, extra)


def _merge_into(into: _Window, other: _Window) -> None:
    into.count += other.count
    into.first_at = min(into.first_at, other.first_at)
    if other.extra:
        # "latest wins": whichever window saw its last observation later has the final say
        if other.last_at > into.last_at:
            into.extra = {**(into.extra or {}), **other.extra}
        else:
            into.extra = {**other.extra, **(into.extra or {})}
    into.last_at = max(into.last_at, other.last_at)


class Coalescer:
    """The coalescing rules as a clock-free state machine.

    Time only enters through ``Observation.at`` and the ``now`` given to
    :meth:`pop_due`, so the rules can be exercised with :meth:`pop_all` alone.
    Every observation is counted exactly once: in the ``count`` of the change it ends
    up in, or in :attr:`dropped` when its window cancelled out (a file created in the
    window that is gone again, deleted or overwritten by a rename).
    """

    def __init__(self, *, quiet: float = 0.5, max_wait: float = 2.0) -> None:
        # max_wait < quiet is allowed: every window then settles at max_wait (fixed batching)
        if not (quiet >= 0 and max_wait >= 0):
            raise ValueError("quiet and max_wait must be >= 0 seconds")
        self._quiet = quiet
        self._max_wait = max_wait
        self._windows: dict[str, _Window] = {}
        # old path -> window that moved away from it: the old path is claimed, not free
        self._vacated: dict[str, _Window] = {}
        self._heap: list[tuple[float, int, _Window]] = []
        self._seq = itertools.count()
        self._pools: dict[_Kind, dict[_Window, None]] = {"create": {}, "delete": {}}
        self._by_content: dict[tuple[_Kind, str], dict[_Window, None]] = {}
        # Ambiguity is sticky until every candidate has settled, so a crowd that thins
        # out does not end in a guessed pair.
        self._crowded = False
        self._spoiled: set[str] = set()
        self.dropped = 0

    @property
    def pending_count(self) -> int:
        return len(self._windows)

    def holds(self, path: str) -> bool:
        """Whether a pending window claims ``path`` (it is there, or moved away from it)."""
        return path in self._windows or path in self._vacated

    def next_deadline(self) -> float | None:
        """Earliest time something may be due; may be early, never late."""
        return self._heap[0][0] if self._heap else None

    def add(self, obs: Observation) -> None:
        change = obs.change
        if change is Change.MODIFIED or change is Change.CREATED:
            self._present(obs, change is Change.CREATED)
        elif change is Change.DELETED:
            self._deleted(obs)
        else:
            self._renamed(obs)

    def pop_due(self, now: float, limit: float = math.inf) -> list[Settled]:
        """Settle every window whose quiet period or max-wait has run out by ``now`` (at
        most ``limit`` of them, the earliest due first)."""
        batch: list[Settled] = []
        heap = self._heap
        while heap and heap[0][0] <= now and len(batch) < limit:
            due, _, w = heapq.heappop(heap)
            if not w.alive or w.due != due:
                continue
            w.due = math.inf
            if self._deadline(w) > now:
                self._schedule(w)
            elif w.candidate is None or not self._pair(w):
                batch.append(self._settle(w))
        return batch

    def pop_all(self) -> list[Settled]:
        """Settle everything now, pairing watcher deletes and creates first."""
        for w in list(self._pools["delete"]):
            if w.candidate is not None:
                self._pair(w)
        batch = [self._settle(w) for w in list(self._windows.values())]
        self._heap.clear()
        return batch

    # -- observation handlers ------------------------------------------------------

    def _present(self, obs: Observation, created: bool) -> None:
        path = obs.path
        w = self._windows.get(path)
        if w is not None:
            if w.new is None:  # deleted earlier in the window: the file is back
                self._delist(w)
                w.new = path
            elif w.candidate is not None and obs.origin != WATCHER:
                self._delist(w)
            self._touch(w, obs)
            return
        w = _Window(None if created else path, obs.at)
        if created and obs.origin == WATCHER and path not in self._vacated:
            self._enlist(w, "create", obs)
        self._move_in(w, path)
        self._touch(w, obs)

    def _deleted(self, obs: Observation) -> None:
        path = obs.path
        w = self._windows.get(path)
        if w is not None:
            if w.candidate is not None and obs.origin != WATCHER:
                self._delist(w)
            self._touch(w, obs)
            if w.new is not None:
                self._remove_thing(w, obs.at)
            return
        v = self._vacated.get(path)
        if v is not None:  # the move away from this path, reported a second time
            self._touch(v, obs)
            return
        w = _Window(path, obs.at)
        if obs.origin == WATCHER:
            self._enlist(w, "delete", obs)
        self._attach(w)
        self._schedule(w)
        self._touch(w, obs)

    def _renamed(self, obs: Observation) -> None:
        source, target = obs.previous_path, obs.path
        if source is None or source == target:
            self._present(obs, created=False)
            return
        v = self._vacated.get(source)
        if v is not None:
            if v.new == target:  # the same move, reported by a second source
                self._touch(v, obs)
            else:  # the source already moved elsewhere: only the arrival is certain
                self._present(obs, created=False)
            return
        w = self._windows.get(source)
        if w is None:
            w = _Window(source, obs.at)
        else:
            self._detach(w)
            if w.displaced:  # the file it had overwritten at the source is gone too
                self._spawn_deleted(source, obs.at)
                w.displaced = False
        occupant = self._windows.get(target)
        if occupant is not None and occupant.new is not None:
            self._remove_thing(occupant, obs.at)  # a rename onto a file replaces it
        self._move_in(w, target)
        self._touch(w, obs)

    # -- state changes ---------------------------------------------------------------

    def _touch(self, w: _Window, obs: Observation) -> None:
        w.count += 1
        at = obs.at
        # A watcher's "modified" after the editor reported the thing (its save) is the echo of
        # that write, seen later: it says nothing about when the activity stopped, so it does
        # not hold the event back by another quiet period.
        echo = obs.origin == WATCHER and obs.change is Change.MODIFIED and w.editor_saw
        w.editor_saw = w.editor_saw or obs.origin != WATCHER
        # Likewise the editor's didSave completes the save its willSave began: the quiet
        # period counts from when the save began, not from when the write was done.
        completes = obs.origin == EDITOR and obs.change is Change.MODIFIED and w.save_begun
        w.save_begun = obs.origin == WILL_SAVE or (w.save_begun and not completes)
        if at > w.last_at and not echo and not completes:
            w.last_at = at
        elif at < w.first_at:  # sources disagree on order: the max-wait starts earlier
            w.first_at = at
            self._schedule(w)
        if obs.extra:
            if w.extra is None:
                w.extra = dict(obs.extra)
            else:
                w.extra.update(obs.extra)

    def _move_in(self, w: _Window, path: str) -> None:
        """Put a detached window's thing at ``path``, taking over what ``path`` had."""
        w.new = path
        gone = self._windows.get(path)
        if gone is not None:  # only a deletion can be left here: the path existed before
            self._detach(gone)
            gone.alive = False
            _merge_into(w, gone)
            self._inherit(w, path)
        else:
            v = self._vacated.get(path)
            if v is not None:
                # The path was renamed away and now holds something else; the earlier
                # move becomes a creation so both changes stay independent of order.
                self._detach(v)
                v.old = None
                self._attach(v)
                self._inherit(w, path)
        self._attach(w)
        self._schedule(w)

    @staticmethod
    def _inherit(w: _Window, path: str) -> None:
        """``path`` existed before the window and ``w`` now occupies it."""
        if w.old is None:
            w.old = path
        elif w.old != path:
            w.displaced = True

    def _remove_thing(self, w: _Window, at: float) -> None:
        path = w.new
        assert path is not None
        self._detach(w)
        if w.displaced:
            self._spawn_deleted(path, at)
            w.displaced = False
        w.new = None
        if w.old is None:
            w.alive = False
            self.dropped += w.count
            return
        self._attach(w)

    def _spawn_deleted(self, path: str, at: float) -> None:
        """A deletion implied by an overwrite: it carries no observation of its own."""
        w = _Window(path, at)
        self._attach(w)
        self._schedule(w)

    def _attach(self, w: _Window) -> None:
        if w.old is None and w.displaced:
            w.old = w.new
        if w.old == w.new:
            w.displaced = False
        self._windows[w.key] = w
        if w.moved:
            assert w.old is not None
            self._vacated[w.old] = w

    def _detach(self, w: _Window) -> None:
        del self._windows[w.key]
        if w.moved:
            assert w.old is not None
            del self._vacated[w.old]
        self._delist(w)

    def _settle(self, w: _Window) -> Settled:
        self._detach(w)
        w.alive = False
        return _settled(w)

    # -- timing ----------------------------------------------------------------------

    def _deadline(self, w: _Window) -> float:
        return min(w.last_at + self._quiet, w.first_at + self._max_wait)

    def _schedule(self, w: _Window) -> None:
        """Queue ``w`` when it is new or its deadline moved earlier; later moves are
        found lazily when the old heap entry comes up."""
        due = self._deadline(w)
        if due < w.due:
            w.due = due
            heapq.heappush(self._heap, (due, next(self._seq), w))

    # -- watcher delete + create pairing ---------------------------------------------

    def _enlist(self, w: _Window, kind: _Kind, obs: Observation) -> None:
        w.candidate = kind
        pool = self._pools[kind]
        pool[w] = None
        if len(pool) > 1:
            self._crowded = True
        key = obs.extra.get("content_key")
        if isinstance(key, str):
            w.content_key = key
            group = self._by_content.setdefault((kind, key), {})
            group[w] = None
            if len(group) > 1:
                self._spoiled.add(key)

    def _delist(self, w: _Window) -> None:
        kind = w.candidate
        if kind is None:
            return
        w.candidate = None
        del self._pools[kind][w]
        key = w.content_key
        if key is not None:
            group = self._by_content[(kind, key)]
            del group[w]
            if not group:
                del self._by_content[(kind, key)]
        if not self._pools["create"] and not self._pools["delete"]:
            self._crowded = False
            self._spoiled.clear()

    def _partner(self, w: _Window) -> _Window | None:
        other: _Kind = "create" if w.candidate == "delete" else "delete"
        key = w.content_key
        if key is not None and key not in self._spoiled:
            group = self._by_content.get((other, key))
            if group:
                return next(iter(group))
        if self._crowded:
            return None
        pool = self._pools[other]
        if len(pool) != 1:
            return None
        partner = next(iter(pool))
        if key is not None and partner.content_key is not None:
            return None  # both carry fingerprints, and they did not match
        return partner

    def _pair(self, w: _Window) -> bool:
        partner = self._partner(w)
        if partner is None:
            return False
        gone, arrived = (w, partner) if w.candidate == "delete" else (partner, w)
        self._detach(gone)
        self._detach(arrived)
        gone.alive = False
        arrived.old = gone.old
        _merge_into(arrived, gone)
        arrived.extra = {**(arrived.extra or {}), PAIRED: True}
        self._attach(arrived)
        self._schedule(arrived)
        return True


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _report_lost(batch: list[Settled], exc: BaseException) -> None:
    logger.error("emit failed; %d file change(s) not delivered", len(batch), exc_info=exc)


class Debouncer:
    """Turns a stream of observations into batches of settled changes.

    A path settles ``quiet`` seconds after its last observation, or ``max_wait``
    seconds after the first one of its window, whichever comes first. One timer
    serves all paths; it fires at the earliest deadline, and the paths due by then reach
    ``emit`` as one list (a report's observations share their time, so they fall due
    together). It adds no delay of its own: a save's latency is the quiet period.

    ``emit`` may be sync or async. Batches are delivered one at a time, in order, from
    a task of their own, so :meth:`observe` never waits for the consumer. A batch
    whose ``emit`` raises goes to ``on_error`` (default: an error log with the count).
    """

    def __init__(
        self,
        emit: Callable[[list[Settled]], Awaitable[None] | None],
        *,
        quiet: float = 0.5,
        max_wait: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[list[Settled], BaseException], None] | None = None,
    ) -> None:
        self._rules = Coalescer(quiet=quiet, max_wait=max_wait)
        self._emit = emit
        self._on_error = on_error
        self._clock = clock
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._unsent: deque[list[Settled]] = deque()
        self._queued = 0  # changes settled and not yet through emit
        self._sender: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def pending_count(self) -> int:
        return self._rules.pending_count

    @property
    def backlog(self) -> int:
        """What is held: paths in their quiet period, and changes not yet through emit."""
        return self._rules.pending_count + self._queued

    @property
    def dropped(self) -> int:
        """Observations whose window cancelled out and produced no change."""
        return self._rules.dropped

    def holds(self, path: str) -> bool:
        """Whether activity for ``path`` is waiting out its quiet period."""
        return self._rules.holds(path)

    def observe(self, obs: Observation) -> None:
        if self._closed:
            raise RuntimeError("debouncer is closed")
        self._rules.add(obs)
        due = self._rules.next_deadline()
        if due is not None and due < self._timer_at:
            self._arm(due)

    def observe_many(self, observations: Sequence[Observation]) -> None:
        """:meth:`observe` of each, in order, with the timer set once."""
        if self._closed:
            raise RuntimeError("debouncer is closed")
        for obs in observations:
            self._rules.add(obs)
        due = self._rules.next_deadline()
        if due is not None and due < self._timer_at:
            self._arm(due)

    def poll(self, limit: float = math.inf) -> int:
        """Settle what is due at ``clock()`` now (at most ``limit`` changes) and queue it for
        ``emit``.

        The internal timer calls this; call it yourself when driving a manual clock.
        Returns how many changes were queued.
        """
        batch = self._rules.pop_due(self._clock(), limit)
        if batch:
            self._send(batch)
        due = self._rules.next_deadline()
        if due is not None and due < self._timer_at and not self._closed:
            self._arm(due)
        return len(batch)

    async def flush(self) -> None:
        """Emit everything pending now and wait until every queued batch is delivered."""
        self._disarm()
        batch = self._rules.pop_all()
        if batch:
            self._send(batch)
        await self.join()

    async def join(self) -> None:
        """Wait until every batch queued so far has been handed to ``emit``."""
        while (sender := self._sender) is not None and not sender.done():
            try:
                # shielded: a caller giving up on waiting must not cancel a delivery
                await asyncio.shield(sender)
            except asyncio.CancelledError:
                if _being_cancelled():
                    raise
                # the delivery task was cancelled by someone else; its batches are queued
                self._start_sender()

    async def aclose(self) -> None:
        """Stop the timer, emit what is pending and wait for the consumer.

        If this wait is cancelled, the delivery is cancelled too and the batches it
        had not delivered go to ``on_error`` with the ``CancelledError``.
        """
        self._closed = True
        try:
            await self.flush()
        except asyncio.CancelledError as exc:
            await self._abandon(exc)
            raise

    # -- internals -------------------------------------------------------------------

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, when - self._clock()), self._fire)
        self._timer_at = when

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = math.inf

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        # A burst's windows come due together: settling 20,000 at once held the event loop
        # for about 100 ms. A step settles a few milliseconds' worth, the next one follows
        # at once, after whatever else is waiting (a request, a commit's answer).
        if self.poll(_STEP_LIMIT) >= _STEP_LIMIT:
            self._arm(self._clock())

    def _send(self, batch: list[Settled]) -> None:
        self._unsent.append(batch)
        self._queued += len(batch)
        self._start_sender()

    def _start_sender(self) -> None:
        if self._unsent and (self._sender is None or self._sender.done()):
            loop = asyncio.get_running_loop()
            self._sender = loop.create_task(self._deliver(), name="mplp-debounce-emit")

    async def _deliver(self) -> None:
        while self._unsent:
            batch = self._unsent.popleft()
            try:
                result = self._emit(batch)
                if result is not None:
                    await result
            except asyncio.CancelledError as exc:
                if _being_cancelled():
                    self._unsent.appendleft(batch)  # not delivered; whoever cancelled reports it
                    raise
                # emit awaited something that was cancelled under it (pygls#621): a failed
                # delivery like any other, not a reason to stop delivering
                self._fail(batch, exc)
            except Exception as exc:
                self._fail(batch, exc)
            self._queued -= len(batch)

    def _fail(self, batch: list[Settled], exc: BaseException) -> None:
        if self._on_error is None:
            _report_lost(batch, exc)
            return
        logger.warning(
            "emit failed (%s); handing %d file change(s) to on_error",
            type(exc).__name__,
            len(batch),
        )
        try:
            self._on_error(batch, exc)
        except Exception:
            logger.exception("on_error failed; %d file change(s) lost", len(batch))

    async def _abandon(self, exc: asyncio.CancelledError) -> None:
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        while self._unsent:
            batch = self._unsent.popleft()
            self._queued -= len(batch)
            self._fail(batch, exc)

"""How a CLI process (a hook, ``mplp-lsp emit``, ``outbox requeue``) writes a workspace's store.

:func:`deliver` checks the submissions first, so bad input is reported at once; rejected ones
go to the owner's intake like the others, which records every rejection the same way (the
integration error log and the store's ``rejected`` counter). Then:

* the state dir is free: take its lock, open the store, submit through the one intake (with
  the PSG consumers attached), close, release — the events are committed on return;
* a daemon (or another CLI process) owns it: write the submissions to one spool file in the
  state dir's inbox (temporary name, fsync, atomic rename) and report them ``queued``; the
  owner drains the inbox (:mod:`mplp_lsp.sources.inbox`).

Whoever holds the lock drains the inbox before letting go and looks again after letting go,
and a process that spooled looks once its file is written, so a file is never left behind
by a race between the two. A faster path to a running daemon (its loopback HTTP API) would go in
:func:`spool` before the spool file.

:func:`requeue_dead_letters` takes the same two ways for putting dead letters back into the
forwarding outbox, and :func:`choose_held` for requeueing or dropping envelopes held for
another remote.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.owner import StoreOwner
from mplp_lsp.engine.statedir import StateDirLock, StatePaths, resolve_state_dir
from mplp_lsp.forward.drain import Drain, DrainReport
from mplp_lsp.forward.held import held_groups
from mplp_lsp.forward.outbox import dead_letters, requeue_named, sink_id
from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.protocol.validator import default_validator
from mplp_lsp.sources import inbox
from mplp_lsp.store.database import connect
from mplp_lsp.store.salvage import ensure_usable
from mplp_lsp.store.writer import StoreWriter

StoreWork = Callable[[sqlite3.Connection], None]
Status = Literal["accepted", "duplicate", "rejected", "queued"]
_RELOCK_ATTEMPTS = 3
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Delivery:
    status: Status
    result: ValidationResult

    @property
    def ok(self) -> bool:
        return self.status != "rejected"


def deliver(
    workspace_root: Path,
    state_dir_override: str | Path | None,
    submissions: Sequence[Submission],
    *,
    also: StoreWork | None = None,
    settings: Settings | None = None,
) -> list[Delivery]:
    """Store ``submissions`` for the workspace, or queue them for the process that owns it.

    ``also`` runs in the store (one transaction, after the events) only when they are stored
    here; a source uses it to record what it reported, which a daemon does by itself.
    ``settings``: the workspace's resolved configuration (its state dir, event family, ...).
    """
    return _deliver(workspace_root, state_dir_override, submissions, also, None, settings)


def _deliver(
    workspace_root: Path,
    state_dir_override: str | Path | None,
    submissions: Sequence[Submission],
    also: StoreWork | None,
    forward: _ForwardSlot | None,
    settings: Settings | None,
) -> list[Delivery]:
    settings = settings or Settings()
    override = state_dir_override or settings.state_dir
    paths = StatePaths(resolve_state_dir(workspace_root, override))
    checked = [_check(submission) for submission in submissions]
    work = submissions or also is not None
    stored = (
        _store(workspace_root, paths, list(submissions), also, forward, settings) if work else []
    )
    return [
        owned if result.ok else Delivery("rejected", result)
        for owned, result in zip(stored, checked, strict=True)
    ]


@dataclass(frozen=True, slots=True)
class ForwardRequest:
    """After storing, forward the store's outbox to ``remote_url`` for up to ``wait`` seconds."""

    remote_url: str
    wait: float = 20.0


def deliver_and_forward(
    workspace_root: Path,
    state_dir_override: str | Path | None,
    submissions: Sequence[Submission],
    forward: ForwardRequest,
    settings: Settings | None = None,
) -> tuple[list[Delivery], DrainReport | None]:
    """:func:`deliver`, then send what the store holds to a remote (CI to a central runtime).

    The store is the spool: what cannot be sent now stays queued for the next run. When a
    daemon owns the store, the events are queued for it and its own forwarding applies (no
    report).
    """
    reports: list[DrainReport] = []
    slot = (forward, reports)
    deliveries = _deliver(workspace_root, state_dir_override, submissions, None, slot, settings)
    return deliveries, (reports[0] if reports else None)


_ForwardSlot = tuple[ForwardRequest, list[DrainReport]]


def _store(
    root: Path,
    paths: StatePaths,
    submissions: list[Submission],
    also: StoreWork | None,
    forward: _ForwardSlot | None,
    settings: Settings,
) -> list[Delivery]:
    lock = StateDirLock(paths.lock, workspace=root)
    if lock.acquire():
        stored = asyncio.run(_own(root, paths, lock, settings, submissions, also, forward))
        _drain_left_behind(root, paths, lock, settings)
        return stored
    if not submissions:
        return []
    spool(paths, submissions)
    _drain_left_behind(root, paths, lock, settings)
    return [Delivery("queued", ValidationResult.success()) for _ in submissions]


def _drain_left_behind(
    root: Path, paths: StatePaths, lock: StateDirLock, settings: Settings
) -> None:
    """After spooling, or after letting the lock go: drain what is pending if the lock is
    free. A spooler looks after writing its file and an owner after releasing, so one of
    them sees every file: a spooler that finds the lock taken leaves its file to an owner
    that has not released yet, and that owner looks after releasing."""
    for _ in range(_RELOCK_ATTEMPTS):
        if not inbox.pending(paths.inbox) or not lock.acquire():
            return  # nothing left, or an owner that looks after releasing has it
        asyncio.run(_own(root, paths, lock, settings, []))


def _check(submission: Submission) -> ValidationResult:
    return default_validator().validate(submission.kind, submission.data)


def spool(
    paths: StatePaths,
    submissions: Sequence[Submission],
    requeue: inbox.Requeue | None = None,
    held: inbox.HeldChoice | None = None,
) -> Path:
    """Spool for the lock holder, durably (its inbox drains it); used by a following daemon
    too. The spool file's path (gone once the owner has taken it).

    (The daemon's HTTP fast path would be tried first here.)"""
    paths.inbox.mkdir(mode=0o700, exist_ok=True)
    name = f"{os.getpid()}-{os.urandom(6).hex()}"
    stamp = f"{_monotonic_name()}-{name}"
    temporary = paths.inbox / f".{stamp}.tmp"
    final = paths.inbox / f"{stamp}{inbox.SPOOL_SUFFIX}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, inbox.encode(list(submissions), requeue, held))
        os.fsync(fd)
    finally:
        os.close(fd)
    temporary.rename(final)
    directory = os.open(paths.inbox, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return final


def _monotonic_name() -> str:
    # Wall-clock nanoseconds, zero-padded: file names sort in arrival order.
    return f"{time.time_ns():020d}"


async def _own(
    root: Path,
    paths: StatePaths,
    lock: StateDirLock,
    settings: Settings,
    submissions: list[Submission],
    also: StoreWork | None = None,
    forward: _ForwardSlot | None = None,
) -> list[Delivery]:
    writer = StoreWriter(paths.database)
    try:
        await asyncio.to_thread(ensure_usable, paths.database)  # salvage a damaged store
        await writer.start()
        owner = StoreOwner(root, settings, paths, writer)
        try:
            await owner.start()
            draining = None
            if forward is not None:
                draining = Drain(writer, owner.bus, forward[0].remote_url)
                await draining.start(settings)
            await inbox.drain(paths.inbox, owner.intake)
            results = await owner.intake.submit_many(submissions)
            if also is not None:
                await writer.run(also)
            await inbox.drain(paths.inbox, owner.intake)
            await owner.drain()
            if forward is not None and draining is not None:
                request, reports = forward
                reports.append(await draining.finish(request.wait))
        finally:
            await owner.close()
        return [Delivery(r.outcome.value, r.result) for r in results]
    finally:
        await writer.close()
        lock.release()


@dataclass(frozen=True, slots=True)
class Requeued:
    moved: int  # dead letters put back (or, handed over, found to be dead letters)
    unknown: list[int]  # seqs asked for that are not dead letters
    handed_to: int | None = None  # the pid of the owner it was handed to
    taken: bool = True  # the owner has taken it (always, when done here)


def requeue_dead_letters(
    workspace_root: Path,
    state_dir_override: str | Path | None,
    seqs: Sequence[int] | None,
    *,
    sink: str | None = None,
    settings: Settings | None = None,
    wait: float = 10.0,
) -> Requeued | None:
    """Put dead letters (``seqs``, or all for None) of the sink named ``sink`` (of every
    sink for None) back into their queues through the store's owner; None when the
    workspace has no store (none is created).

    With the state dir free this process is the owner for the moment. Otherwise which of
    ``seqs`` are dead letters is read here, and the requeue goes to the owner through its
    inbox; this waits up to ``wait`` seconds for the owner to take it.
    """

    def here(conn: sqlite3.Connection) -> Requeued:
        return Requeued(*requeue_named(conn, seqs, sink=sink))

    def hand_over(paths: StatePaths, lock: StateDirLock, settings: Settings) -> Requeued:
        with contextlib.closing(connect(paths.database, read_only=True)) as conn:
            found = None if sink is None else sink_id(conn, sink)
            letters = (
                []
                if sink is not None and found is None
                else dead_letters(conn, seqs=seqs, sink=found)
            )
            known = sorted({letter.seq for letter in letters})
        unknown = [] if seqs is None else sorted(set(seqs) - set(known))
        if seqs is not None and not known:
            return Requeued(0, unknown, _owner_pid(lock))
        request = inbox.Requeue(None if seqs is None else tuple(known), sink)
        pid, taken = _hand_to_owner(workspace_root, paths, lock, settings, wait, requeue=request)
        return Requeued(len(known), unknown, pid, taken)

    return _through_owner(workspace_root, state_dir_override, settings, here, hand_over)


@dataclass(frozen=True, slots=True)
class HeldDone:
    count: int  # envelopes requeued or dropped (or, handed over, held when it was handed over)
    handed_to: int | None = None  # the pid of the owner it was handed to
    taken: bool = True  # the owner has taken it (always, when done here)


def choose_held(
    workspace_root: Path,
    state_dir_override: str | Path | None,
    choice: inbox.HeldChoice,
    *,
    settings: Settings | None = None,
    wait: float = 10.0,
) -> HeldDone | None:
    """Requeue or drop the envelopes held for another remote through the store's owner, as
    :func:`requeue_dead_letters` requeues dead letters; None when there is no store."""

    def here(conn: sqlite3.Connection) -> HeldDone:
        return HeldDone(inbox.apply_held(choice, conn))

    def hand_over(paths: StatePaths, lock: StateDirLock, settings: Settings) -> HeldDone:
        with contextlib.closing(connect(paths.database, read_only=True)) as conn:
            count = sum(group.count for group in held_groups(conn, choice.remote))
        if not count:
            return HeldDone(0, _owner_pid(lock))
        pid, taken = _hand_to_owner(workspace_root, paths, lock, settings, wait, held=choice)
        return HeldDone(count, pid, taken)

    return _through_owner(workspace_root, state_dir_override, settings, here, hand_over)


def _through_owner(
    root: Path,
    override: str | Path | None,
    settings: Settings | None,
    here: Callable[[sqlite3.Connection], R],
    hand_over: Callable[[StatePaths, StateDirLock, Settings], R],
) -> R | None:
    """``here`` in the store, owned by this process for the moment if the state dir is free,
    else ``hand_over`` to its owner; None when the workspace has no store (none is made)."""
    settings = settings or Settings()
    paths = StatePaths(resolve_state_dir(root, override or settings.state_dir))
    if not paths.database.exists():
        return None
    lock = StateDirLock(paths.lock, workspace=root)
    if lock.acquire():
        return _own_once(root, paths, lock, settings, here)
    return hand_over(paths, lock, settings)


def _own_once(
    root: Path,
    paths: StatePaths,
    lock: StateDirLock,
    settings: Settings,
    work: Callable[[sqlite3.Connection], R],
) -> R:
    """``work`` in the store, owned by this process for the moment (the lock is held: it is
    released here)."""
    done: list[R] = []

    def run(conn: sqlite3.Connection) -> None:
        done.append(work(conn))

    asyncio.run(_own(root, paths, lock, settings, [], run))
    _drain_left_behind(root, paths, lock, settings)
    return done[0]


def _owner_pid(lock: StateDirLock) -> int | None:
    owner = lock.owner() or {}
    pid = owner.get("pid")
    return pid if isinstance(pid, int) else None


def _hand_to_owner(
    root: Path,
    paths: StatePaths,
    lock: StateDirLock,
    settings: Settings,
    wait: float,
    *,
    requeue: inbox.Requeue | None = None,
    held: inbox.HeldChoice | None = None,
) -> tuple[int | None, bool]:
    """Spool a request for the owner and wait up to ``wait`` s for it to be taken: the
    owner's pid, and whether it was taken."""
    pid = _owner_pid(lock)
    spooled = spool(paths, [], requeue, held)
    _drain_left_behind(root, paths, lock, settings)
    deadline = time.monotonic() + wait
    while spooled.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid, not spooled.exists()

"""The inbox: what CLI processes handed over while a daemon owned the store.

A CLI process that finds the state dir locked writes its submissions to one file in
``<state dir>/inbox`` (temporary name, fsync, atomic rename, see :mod:`mplp_lsp.engine.handoff`);
``mplp-lsp outbox requeue`` writes its requeue of dead letters, and ``requeue --held`` /
``drop --held`` their choice for envelopes held for another remote, the same way.
Whoever owns the store drains it: the daemon on a short stat poll, or a CLI process that
gets the lock. A file is deleted only after its events committed, so a crash in between
means they are submitted again and the intake drops them as duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from mplp_lsp.engine.intake import Intake, Submission
from mplp_lsp.forward.held import drop_held, requeue_held
from mplp_lsp.forward.outbox import COLLECTOR, ensure_sink, requeue_named
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult

log = logging.getLogger(__name__)

SPOOL_SUFFIX = ".json"
# Leaves out what the store already records (an editor beside the owner reports its saves too).
Screen = Callable[[list[Submission]], Awaitable[list[Submission]]]
DEFAULT_INTERVAL = 0.5


@dataclass(frozen=True, slots=True)
class Requeue:
    """Dead letters to put back into the forwarding outbox: those ``seqs``, or all (None),
    of the sink named ``sink`` (of every sink for None)."""

    seqs: tuple[int, ...] | None
    sink: str | None = None


@dataclass(frozen=True, slots=True)
class HeldChoice:
    """Envelopes held for another remote (``remote``'s, or all for None): ``requeue`` them to
    the remote of the sink named ``sink``, or ``drop`` them (:mod:`mplp_lsp.forward.held`)."""

    action: Literal["requeue", "drop"]
    remote: str | None
    sink: str = COLLECTOR


@dataclass(frozen=True, slots=True)
class Spooled:
    submissions: list[Submission]
    requeue: Requeue | None = None
    held: HeldChoice | None = None


def encode(
    submissions: list[Submission], requeue: Requeue | None = None, held: HeldChoice | None = None
) -> bytes:
    items = [
        {"kind": s.kind.value, "data": s.data, "source_module": s.source_module, "source": s.source}
        for s in submissions
    ]
    body: dict[str, Any] = {"submissions": items}
    if requeue is not None:
        body["requeue_dead"] = {
            "seqs": None if requeue.seqs is None else list(requeue.seqs),
            "sink": requeue.sink,
        }
    if held is not None:
        body["held"] = {"action": held.action, "remote": held.remote, "sink": held.sink}
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def decode(raw: bytes) -> Spooled:
    """What one spool file holds; ValueError if it is not one we wrote."""
    body = json.loads(raw)
    submissions = [
        # Paths from a spool file are never trusted: the intake checks them again.
        Submission(Kind(item["kind"]), item["data"], str(item["source_module"]), item["source"])
        for item in body["submissions"]
    ]
    requeue = None
    if "requeue_dead" in body:
        seqs = body["requeue_dead"]["seqs"]
        if seqs is not None and not all(type(seq) is int for seq in seqs):
            raise ValueError("requeue_dead.seqs holds something other than integers")
        sink = body["requeue_dead"].get("sink")
        if not (sink is None or isinstance(sink, str)):
            raise ValueError("requeue_dead.sink is not a sink's name")
        requeue = Requeue(None if seqs is None else tuple(seqs), sink)
    return Spooled(submissions, requeue, _held_choice(body.get("held")))


def _held_choice(raw: Any) -> HeldChoice | None:
    if raw is None:
        return None
    action, remote, sink = raw["action"], raw["remote"], raw.get("sink", COLLECTOR)
    if action not in ("requeue", "drop") or not (remote is None or isinstance(remote, str)):
        raise ValueError("held: not a requeue or drop of a remote's envelopes")
    if not isinstance(sink, str):
        raise ValueError("held: the sink is not a sink's name")
    return HeldChoice(action, remote, sink)


def apply_held(choice: HeldChoice, conn: sqlite3.Connection) -> int:
    """Carry out ``choice`` in the store; how many envelopes it moved or dropped."""
    if choice.action == "drop":
        return drop_held(conn, choice.remote)
    return requeue_held(conn, ensure_sink(conn, choice.sink), choice.remote)


def pending(inbox: Path) -> list[Path]:
    try:
        names = sorted(e.name for e in os.scandir(inbox) if e.name.endswith(SPOOL_SUFFIX))
    except FileNotFoundError:
        return []
    return [inbox / name for name in names]


async def drain(inbox: Path, intake: Intake, screen: Screen | None = None) -> int:
    """Submit every spool file in arrival order (and requeue what it asks to); the number of
    files taken."""
    files = pending(inbox)
    for path in files:
        try:
            raw = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            continue  # another drainer took it
        try:
            spooled = decode(raw)
        except (ValueError, KeyError, TypeError) as error:
            result = ValidationResult.single("", ErrorCode.INVALID_JSON, f"bad spool file: {error}")
            excerpt = raw[:2048].decode(errors="replace")
            await intake.reject(Submission(Kind.ENVELOPE, excerpt, "inbox"), result)
        else:
            submissions = spooled.submissions
            if screen is not None:
                submissions = await screen(submissions)
            await intake.submit_many(submissions)
            if spooled.requeue is not None:
                requeue = partial(
                    requeue_named, seqs=spooled.requeue.seqs, sink=spooled.requeue.sink
                )
                moved, _ = await intake.writer.run(requeue)
                log.info("inbox: requeued %d dead letter(s) as asked", moved)
            if spooled.held is not None:
                done = await intake.writer.run(partial(apply_held, spooled.held))
                log.info("inbox: %s %d held envelope(s) as asked", spooled.held.action, done)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return len(files)


class InboxSource:
    """Drains the inbox when its directory changes (one stat per interval when idle)."""

    def __init__(
        self,
        inbox: Path,
        intake: Intake,
        *,
        interval: float = DEFAULT_INTERVAL,
        screen: Screen | None = None,
    ) -> None:
        self._inbox = inbox
        self._intake = intake
        self._screen = screen
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._seen: Any = None

    async def start(self) -> None:
        self._inbox.mkdir(mode=0o700, exist_ok=True)
        await drain(self._inbox, self._intake, self._screen)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                info = self._inbox.stat()
            except FileNotFoundError:
                continue
            stamp = (info.st_mtime_ns, info.st_ino)
            if stamp == self._seen and not _recent(info.st_mtime_ns):
                continue
            try:
                await drain(self._inbox, self._intake, self._screen)
                self._seen = stamp
            except Exception:
                log.exception("inbox: could not drain %s; trying again", self._inbox)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        # What arrived meanwhile is taken now rather than at the next start.
        await drain(self._inbox, self._intake, self._screen)


def _recent(mtime_ns: int) -> bool:
    # A second file renamed in within the same clock tick leaves the mtime unchanged.
    return time.time_ns() - mtime_ns < 2_000_000_000

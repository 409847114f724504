"""``mplp-lsp hooks ingest``: the background ingester a git hook starts when nobody takes the
hooks' spool (no daemon records the workspace).

It stays out of Git's way: below git's priority (``nice``, set by ``hooks ingest`` before
it imports anything heavy), it waits until the hooks have been quiet for a moment
(:meth:`~mplp_lsp.vcs.spool.Spool.wait_quiet`: a script of git commands is taken in one
round, not one round per command), takes the store, turns what the hooks recorded into events
(:meth:`mplp_lsp.sources.git.GitSource.ingest`) and lets the store go again at once (a
daemon starting meanwhile gets it). It then waits up to :data:`LINGER` for more, rather than
leaving the next hook to start Python again. It stops being the ingester only with the
spool's log empty, and looks once more after that: a hook that found it still named had
written its record first, so either this process sees the record or the hook starts the
next ingester. It never fails a git command (it runs detached, its output discarded);
problems go to ``git-spool/ingester.log`` in the state dir.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.owner import StoreOwner
from mplp_lsp.engine.statedir import StateDirLock, StatePaths, resolve_state_dir
from mplp_lsp.sanitize.log_format import FORMAT, RedactingFormatter
from mplp_lsp.sources.git import GitSource
from mplp_lsp.store.salvage import ensure_usable
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.vcs.spool import Spool

log = logging.getLogger(__name__)

BUSY_WAIT = 0.2  # seconds between attempts at a store someone else holds
BUSY_LIMIT = 600.0  # give up after this long: the records wait for the next process
LINGER = 3.0  # seconds to wait for more records after a round
LOG_NAME = "ingester.log"
_LOG_BYTES = 1 << 20
_LOOK = 0.05
# After a round: "done", "waiting" (records wait for a push to end), "stop" (the repository
# cannot be read, or the store stays taken: the records wait for the next process).
Outcome = Literal["done", "waiting", "stop"]


def run_ingester(root: Path, settings_now: Callable[[], Settings]) -> int:
    """``settings_now`` is asked again for each round: the records of a commit made after
    the settings file changed are ingested with what it says then, as a hook run at that
    moment would have. The store stays the one the hook named."""
    paths = StatePaths(resolve_state_dir(root, settings_now().state_dir))
    spool = Spool(paths.git_spool)
    spool.ensure()
    _log_to(spool.directory / LOG_NAME)
    me = os.getpid()
    try:
        while True:
            spool.wait_quiet()
            outcome = _take(root, paths, settings_now(), spool)
            if outcome == "waiting":
                time.sleep(BUSY_WAIT)  # a push the records wait for is still running
                continue
            if outcome == "done" and _more_within(spool, LINGER):
                continue
            spool.release(me)
            if outcome == "stop" or not spool.has_new() or not spool.try_claim(me):
                return 0
    except Exception:
        log.exception("the hooks' spool of %s could not be ingested", root)
        return 1
    finally:
        spool.release(me)


def _more_within(spool: Spool, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if spool.has_new():
            return True
        time.sleep(_LOOK)
    return False


def _log_to(path: Path) -> None:
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=_LOG_BYTES, backupCount=1, encoding="utf-8"
    )
    handler.setFormatter(RedactingFormatter(FORMAT))
    logging.getLogger().addHandler(handler)


def _take(root: Path, paths: StatePaths, settings: Settings, spool: Spool) -> Outcome:
    """Ingest while holding the store."""
    lock = StateDirLock(paths.lock, workspace=root)
    deadline = time.monotonic() + BUSY_LIMIT
    while not lock.acquire():
        if not spool.has_new():
            return "done"  # its owner took the records (a daemon, a `drift` run do)
        if time.monotonic() > deadline:
            return "stop"
        time.sleep(BUSY_WAIT)
    try:
        return asyncio.run(_ingest(root, paths, settings, spool))
    finally:
        lock.release()


async def _ingest(root: Path, paths: StatePaths, settings: Settings, spool: Spool) -> Outcome:
    writer = StoreWriter(paths.database)
    await asyncio.to_thread(ensure_usable, paths.database)  # salvage a damaged store
    await writer.start()
    owner = StoreOwner(root, settings, paths, writer)
    try:
        await owner.start()
        source = GitSource(
            root,
            writer,
            owner.intake,
            poll_interval=0,
            email_policy=settings.git_author_email,
            spool=spool,
        )
        try:
            if not await source.open():
                log.warning("the hooks' records wait: %s", source.problem)
                return "stop"
            await source.ingest()
            waiting = source.spool_pending()
        finally:
            await source.close()
        await owner.drain()
        return "waiting" if waiting else "done"
    finally:
        await owner.close()
        await writer.close()

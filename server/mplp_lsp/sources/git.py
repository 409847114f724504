"""The Git source: the workspace repository's ref changes, as git_events, through the intake.

Two ways in, one recorded state (:mod:`mplp_lsp.sources.git_state`):

* **The hooks' spool** (:mod:`mplp_lsp.sources.git_spool`): every ref update exactly, in
  Git's order. It is looked at every :data:`SPOOL_INTERVAL` (a few ``stat`` calls), whether
  polling is on or not.
* **Polling**: a poll stats a few files (:class:`~mplp_lsp.vcs.refs.Signature`) and stops
  there when nothing moved. When something did, it reads the refs and diffs them against
  the recorded state (:mod:`mplp_lsp.sources.git_diff`).

With our hooks installed the spool is the authority: a difference the poller finds is
reported only if it is still there, unexplained by the spool, at a second look
:data:`CONFIRM` seconds later (the hooks of the operation that made it may not have written
yet). Without hooks it is reported at once. Either way, payloads come from the same rules
(:mod:`mplp_lsp.vcs.operations`) and the new state is recorded only after the intake
committed them: should the daemon die in between, the next start derives the same payloads
and the intake drops them as duplicates.

The first poll after start is the catch-up: whatever happened while the daemon was down
comes out once, oldest first. The first time a store meets a repository it records the
state as the baseline and reports nothing: history from before is not activity. All git
and file work runs on the source's own thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mplp_lsp.config.settings import EmailPolicy
from mplp_lsp.engine.intake import Intake, Submission
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sources.git_diff import diff_updates, message_lookup
from mplp_lsp.sources.git_spool import SpoolReader
from mplp_lsp.sources.git_state import Recorded, load, save
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.vcs import hooks
from mplp_lsp.vcs.hook_names import TRANSACTION_HOOK
from mplp_lsp.vcs.operations import RefUpdate, git_events
from mplp_lsp.vcs.refs import HEAD, Signature, Snapshot, read_snapshot
from mplp_lsp.vcs.repo import GitRepo, RepoRefused
from mplp_lsp.vcs.spool import Spool

log = logging.getLogger(__name__)

SOURCE_MODULE = "git"
SPOOL_INTERVAL = 0.2  # seconds between looks at the hooks' spool
CONFIRM = 0.5  # seconds before the poller reports what the hooks may still report


@dataclass(frozen=True, slots=True)
class Scan:
    snapshot: Snapshot
    updates: list[RefUpdate]


class GitSource:
    def __init__(
        self,
        root: Path,
        writer: StoreWriter,
        intake: Intake,
        *,
        poll_interval: float,
        email_policy: EmailPolicy,
        spool: Spool | None = None,
    ) -> None:
        self._root = root
        self._writer = writer
        self._intake = intake
        self.poll_interval = poll_interval
        self.email_policy: EmailPolicy = email_policy
        self._spool = spool
        self._reader = SpoolReader(spool) if spool is not None else None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="mplp-git")
        self._repo: GitRepo | None = None
        self._signature: Signature | None = None
        self._recorded = Recorded(None, None)
        self._hook: Path | None = None  # where our reference-transaction hook would be
        self._claimed = False  # this process is the spool's ingester until it closes
        self._unconfirmed: list[RefUpdate] | None = None  # what the poller saw, not reported
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._once: asyncio.Task[None] | None = None
        self._again: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self.problem: str | None = None  # why the repository is not watched, if it is not
        self.emitted = 0

    async def open(self) -> bool:
        """Open the repository and load the recorded state; False if it is not watched."""
        loop = asyncio.get_running_loop()
        try:
            self._repo = await loop.run_in_executor(self._executor, GitRepo.open, self._root)
        except RepoRefused as refused:
            self.problem = str(refused)
            log.info("git: %s is not watched: %s", self._root, refused)
            return False
        info = self._repo.info
        self._signature = Signature(info.git_dir, info.common_dir)
        self._recorded = await self._writer.read(load)
        self._hook = await loop.run_in_executor(self._executor, self._hook_path)
        return True

    async def start(self) -> None:
        """Open, take over the spool, catch up, and keep watching (polling unless the
        interval is 0; the spool always)."""
        if not await self.open():
            return
        if self._spool is not None:
            await asyncio.to_thread(self._spool.claim, os.getpid())
            self._claimed = True
        await self.poll()
        loop = asyncio.get_running_loop()
        if self.poll_interval > 0:
            self._tasks.append(loop.create_task(self._run()))
        if self._spool is not None:
            self._tasks.append(loop.create_task(self._watch_spool()))

    def notify(self) -> None:
        """Something under .git changed (an editor notification): poll now, also when
        periodic polling is off."""
        if self.poll_interval > 0 and self._tasks:
            self._wake.set()
        elif self._repo is not None and self._once is None:
            self._once = asyncio.get_running_loop().create_task(self._poll_once())

    async def _poll_once(self) -> None:
        try:
            await self.poll()
        except Exception:
            log.exception("git: poll of %s failed", self._root)
        finally:
            self._once = None

    async def sync(self) -> None:
        """Poll now and return once what it found is recorded (before comparing the
        repository with the recorded state); a difference waiting for its second look gets
        it."""
        await self.poll()
        if self._unconfirmed is not None:
            await asyncio.sleep(CONFIRM)
            await self.poll()

    def spool_pending(self) -> bool:
        """Whether records are left in the spool (waiting for a push to end, or new)."""
        return self._spool is not None and self._spool.pending(self._recorded.offsets)

    async def ingest(self) -> int:
        """Take what the hooks recorded; the number of events accepted."""
        if self._repo is None:
            return 0
        async with self._lock:
            return await self._ingest()

    async def poll(self) -> int:
        """The spool, then one poll; the number of events accepted."""
        if self._repo is None:
            return 0
        async with self._lock:
            accepted = await self._ingest()
            # The idle case stays on the loop: a few stat calls cost less than a thread hop.
            assert self._signature is not None
            if self._recorded.refs is not None and not self._signature.changed():
                return accepted
            if self._recorded.refs is not None and _rebase_in_progress(self._repo.info.git_dir):
                # Mid-rebase HEAD is detached on half-replayed commits: look again when the
                # rebase is over and report where it ended (the hooks see its end too).
                return accepted
            loop = asyncio.get_running_loop()
            scan = await loop.run_in_executor(self._executor, self._scan, self._recorded.refs)
            if scan is None:
                return accepted
            if scan.updates and scan.updates != self._unconfirmed and self._hooks_installed():
                self._unconfirmed = scan.updates
                self._signature.invalidate()
                self._look_again()
                return accepted
            self._unconfirmed = None
            return accepted + await self._report(scan)

    async def _ingest(self) -> int:
        spool, reader, repo = self._spool, self._reader, self._repo
        if spool is None or reader is None or repo is None:
            return 0
        recorded = self._recorded
        if not spool.pending(recorded.offsets):
            return 0
        loop = asyncio.get_running_loop()
        policy = self.email_policy
        ingested = await loop.run_in_executor(
            self._executor, lambda: reader.ingest(repo, recorded, policy)
        )
        if ingested is None:
            return 0
        log.debug(
            "git: %d hook record(s) taken from the spool: %d event(s)",
            len(ingested.used),
            len(ingested.payloads),
        )
        accepted = await self._submit(ingested.payloads)
        left = await loop.run_in_executor(
            self._executor, spool.finish, ingested.read, ingested.used
        )
        state = Recorded(ingested.refs, ingested.head_target, left)
        await self._writer.run(lambda conn: save(conn, ingested.refs, state))
        self._recorded = state
        return accepted

    async def _report(self, scan: Scan) -> int:
        loop = asyncio.get_running_loop()
        recorded = self._recorded
        payloads = []
        if scan.updates and recorded.refs is not None:
            known = {value for name, value in recorded.refs.items() if name != HEAD}
            payloads = await loop.run_in_executor(
                self._executor, self._payloads, scan.updates, known
            )
        accepted = await self._submit(payloads)
        state = Recorded(scan.snapshot.refs, scan.snapshot.head_target, recorded.offsets)
        if (state.refs, state.head_target) != (recorded.refs, recorded.head_target):
            await self._writer.run(lambda conn: save(conn, scan.snapshot.refs, state))
        self._recorded = state
        return accepted

    async def _submit(self, payloads: list[dict[str, object]]) -> int:
        results = await self._intake.submit_many(
            [Submission(Kind.GIT, payload, SOURCE_MODULE) for payload in payloads]
        )
        for payload, result in zip(payloads, results, strict=True):
            if not result.result.ok:
                log.warning("git: %s rejected: %s", payload.get("commit_id"), result.result)
        accepted = sum(1 for result in results if result.accepted)
        self.emitted += accepted
        return accepted

    def _scan(self, recorded: dict[str, str] | None) -> Scan | None:
        """What changed since ``recorded``; None when a rebase was under way meanwhile."""
        repo, signature = self._repo, self._signature
        assert repo is not None and signature is not None
        signature.record()
        snapshot = read_snapshot(repo.info.git_dir, repo.info.common_dir)
        if recorded is None:
            return Scan(snapshot, [])
        if _rebase_in_progress(repo.info.git_dir):
            # Checked again after reading: a rebase that began since poll() looked may be
            # in this snapshot. Its state dir outlives every ref it moves, so checking after
            # the read cannot miss one. The next poll reads again.
            signature.invalidate()
            return None
        return Scan(snapshot, diff_updates(repo, recorded, snapshot))

    def _payloads(self, updates: list[RefUpdate], known: set[str]) -> list[dict[str, object]]:
        repo = self._repo
        assert repo is not None
        policy = self.email_policy
        return git_events(repo, updates, known, message_lookup(repo), email_policy=policy)

    def _hook_path(self) -> Path | None:
        assert self._repo is not None
        try:
            directory = hooks.hooks_dir(self._repo)
        except Exception:  # git could not say: as if no hook were installed
            return None
        old = hooks.outdated(directory)
        if old:
            log.warning(
                "git: hooks of an older mplp-lsp in %s (%s) start Python on every Git "
                "command; `mplp-lsp hooks install` upgrades them",
                directory,
                ", ".join(old),
            )
        return directory / TRANSACTION_HOOK

    def _hooks_installed(self) -> bool:
        return self._hook is not None and self._spool is not None and hooks.is_ours(self._hook)

    def _look_again(self) -> None:
        if self._again is not None:
            self._again.cancel()
        self._again = asyncio.get_running_loop().call_later(CONFIRM, self.notify)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)
            self._wake.clear()
            try:
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("git: poll of %s failed; trying again", self._root)

    async def _watch_spool(self) -> None:
        assert self._spool is not None
        while True:
            await asyncio.sleep(SPOOL_INTERVAL)
            if not self._spool.pending(self._recorded.offsets):
                continue
            try:
                await self.ingest()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("git: the hooks' spool of %s could not be taken", self._root)

    async def close(self) -> None:
        if self._again is not None:
            self._again.cancel()
        if self._once is not None:
            await asyncio.gather(self._once, return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._spool is not None and self._claimed:
            # Hooks from now on start an ingester of their own; what came before is taken now.
            await asyncio.to_thread(self._spool.release, os.getpid())
            try:
                await self.ingest()
            except Exception:
                log.exception("git: the hooks' spool of %s could not be taken", self._root)
        async with self._lock:
            if self._repo is not None:
                self._repo.close()
        self._executor.shutdown(wait=True)


def _rebase_in_progress(git_dir: Path) -> bool:
    return (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir()

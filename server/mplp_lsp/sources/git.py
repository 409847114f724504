"""The Git source: the workspace repository's ref changes, as git_events, through the intake.

A poll stats a few files (:class:`~mplp_lsp.vcs.refs.Signature`) and stops there when nothing
moved. When something did, it reads the refs, diffs them against the state recorded in the
store (table ``git_refs``), turns the differences into payloads with the rules of
:mod:`mplp_lsp.vcs.operations` and submits them; the new state is recorded only after the
intake committed them. The first poll after start is the catch-up: whatever happened while
the daemon was down comes out once, oldest first. Should the daemon die between the events
and the state, the next catch-up produces the same payloads and the intake drops them as
duplicates, so nothing is reported twice.

The first time a store meets a repository it records the state as the baseline and reports
nothing: history from before is not activity. All git and file work runs on the source's own
thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mplp_lsp.intake import Intake, Submission
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sanitize.redact import redact_name, redact_names
from mplp_lsp.settings import EmailPolicy
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.vcs.operations import RefUpdate, git_events
from mplp_lsp.vcs.refs import (
    HEAD,
    ZERO,
    Signature,
    Snapshot,
    read_snapshot,
    reflog_creation,
    reflog_entry,
    reflog_newest,
    reflog_path,
)
from mplp_lsp.vcs.repo import GitRepo, RepoRefused

log = logging.getLogger(__name__)

SOURCE_MODULE = "git"
BASELINE_KEY = "git.baseline"
# The branch HEAD pointed to when the refs were recorded ("": detached), named as the refs
# are stored: redacted.
HEAD_KEY = "git.head"
EMAIL_POLICY_KEY = "git.author_email"  # read by hook processes, so both report alike
_LAST = float("inf")


@dataclass(frozen=True, slots=True)
class Scan:
    refs: dict[str, str]
    head_target: str | None
    payloads: list[dict[str, Any]]


# The store records ref names as the events name them: redacted (`fix/password=...` keeps no
# password). Comparisons with the repository go through as_current.


def stored_refs(refs: Mapping[str, str]) -> dict[str, str]:
    return dict(zip(redact_names(list(refs)), refs.values(), strict=True))


def as_current(recorded: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """``recorded`` under the names the refs have now: a stored (redacted) name becomes the
    current ref it stands for; names already current stay."""
    names = list(current)
    real = {
        stored: name
        for stored, name in zip(redact_names(names), names, strict=True)
        if stored != name
    }
    return {real.get(name, name): value for name, value in recorded.items()}


def load_refs(conn: sqlite3.Connection) -> dict[str, str] | None:
    """The recorded ref state, names as stored (see :func:`as_current`); None if this store
    never recorded one."""
    if EventLog(conn).get_meta(BASELINE_KEY) is None:
        return None
    return dict(conn.execute("SELECT ref_name, object_id FROM git_refs").fetchall())


def save_refs(conn: sqlite3.Connection, refs: dict[str, str], head_target: str | None) -> None:
    conn.execute("DELETE FROM git_refs")
    conn.executemany("INSERT INTO git_refs VALUES (?, ?)", sorted(stored_refs(refs).items()))
    events = EventLog(conn)
    events.set_meta(BASELINE_KEY, "1")
    events.set_meta(HEAD_KEY, redact_name(head_target or ""))  # as the refs are stored


def advance_refs(conn: sqlite3.Connection, updates: Sequence[RefUpdate], current: Snapshot) -> None:
    """Record ref updates someone else (a hook) reported; with no state recorded yet, take
    ``current`` (the refs as that reporter saw them) as the baseline. A ref is recorded at
    the value it had when the reporter looked, never at an older one: hook processes for
    one operation finish in any order."""
    events = EventLog(conn)
    if events.get_meta(BASELINE_KEY) is None:
        save_refs(conn, current.refs, current.head_target)
    for ref in {update.ref for update in updates}:
        value = current.refs.get(ref)
        stored = redact_name(ref)
        if value is None:
            conn.execute("DELETE FROM git_refs WHERE ref_name = ?", (stored,))
        else:
            conn.execute("INSERT OR REPLACE INTO git_refs VALUES (?, ?)", (stored, value))
    events.set_meta(HEAD_KEY, redact_name(current.head_target or ""))


def diff_updates(repo: GitRepo, before: dict[str, str], after: Snapshot) -> list[RefUpdate]:
    """One update per changed ref (two for a branch created and moved on since), in the
    order they most likely happened."""
    updates = []
    before = as_current(before, after.refs)
    for name in sorted(before.keys() | after.refs.keys()):
        old, new = before.get(name, ZERO), after.refs.get(name, ZERO)
        if old != new:
            updates += _split_creation(repo, _deleted_tip(repo, RefUpdate(name, old, new)))
    return sorted(updates, key=lambda update: _order(repo, update))


def _deleted_tip(repo: GitRepo, update: RefUpdate) -> RefUpdate:
    """A branch gone since the last poll may have moved on before it went (``checkout -b t``,
    commits, ``checkout main``, ``branch -d t`` between two polls): its tip when it was
    deleted is where HEAD left it, if that descends from the tip recorded. The hooks report
    that deletion with that tip; reporting the recorded one would be a second, wrong one."""
    if update.new != ZERO or update.old == ZERO or not update.ref.startswith("refs/heads/"):
        return update
    name = update.ref.removeprefix("refs/heads/")
    head_log = reflog_path(repo.info.git_dir, repo.info.common_dir, HEAD)
    left = reflog_newest(head_log, f"checkout: moving from {name} to ")
    if left is None or left.old in (update.old, ZERO):
        return update
    try:
        descends = repo.run("merge-base", update.old, left.old).strip() == update.old
    except Exception:  # an object pruned since: keep what was recorded
        return update
    return RefUpdate(update.ref, left.old, ZERO) if descends else update


def _split_creation(repo: GitRepo, update: RefUpdate) -> list[RefUpdate]:
    """A branch created and moved on between two polls: its creation, then the move, as
    the hooks report them (``branch_create`` names the commit it was created at)."""
    if update.old != ZERO or update.new == ZERO or not update.ref.startswith("refs/heads/"):
        return [update]
    path = reflog_path(repo.info.git_dir, repo.info.common_dir, update.ref)
    created = reflog_creation(path)
    if created is None or created.new == update.new:
        return [update]
    return [
        RefUpdate(update.ref, ZERO, created.new),
        RefUpdate(update.ref, created.new, update.new),
    ]


def _order(repo: GitRepo, update: RefUpdate) -> tuple[float, int, str]:
    # Reflog time first; within a second, a fetch before the merge it feeds, a commit
    # before the push that sends it. Tags have no reflog and name commits seen already.
    if update.ref.startswith("refs/tags/"):
        return (_LAST, 3, update.ref)
    entry = None
    if update.new != ZERO:
        path = reflog_path(repo.info.git_dir, repo.info.common_dir, update.ref)
        entry = reflog_entry(path, update.new)
    when = float(entry.timestamp) if entry is not None else -1.0
    if update.ref.startswith("refs/remotes/"):
        pushed = entry is not None and entry.message.startswith("update by push")
        return (when, 4 if pushed else 0, update.ref)
    return (when, 2 if update.ref == HEAD else 1, update.ref)


def message_lookup(repo: GitRepo) -> Any:
    def message(ref: str, new: str) -> str | None:
        entry = reflog_entry(reflog_path(repo.info.git_dir, repo.info.common_dir, ref), new)
        return None if entry is None else entry.message

    return message


class GitSource:
    def __init__(
        self,
        root: Path,
        writer: StoreWriter,
        intake: Intake,
        *,
        poll_interval: float,
        email_policy: EmailPolicy,
    ) -> None:
        self._root = root
        self._writer = writer
        self._intake = intake
        self.poll_interval = poll_interval
        self.email_policy: EmailPolicy = email_policy
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="mplp-git")
        self._repo: GitRepo | None = None
        self._signature: Signature | None = None
        self._recorded: dict[str, str] | None = None
        self._recorded_head: str | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._once: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.problem: str | None = None  # why the repository is not watched, if it is not
        self.emitted = 0

    async def start(self) -> None:
        """Open the repository, catch up, and start polling (unless the interval is 0)."""
        loop = asyncio.get_running_loop()
        try:
            self._repo = await loop.run_in_executor(self._executor, GitRepo.open, self._root)
        except RepoRefused as refused:
            self.problem = str(refused)
            log.info("git: %s is not watched: %s", self._root, refused)
            return
        info = self._repo.info
        self._signature = Signature(info.git_dir, info.common_dir)
        policy = self.email_policy
        self._recorded, self._recorded_head = await self._writer.run(
            lambda conn: _start_state(conn, policy)
        )
        await self.poll()
        if self.poll_interval > 0:
            self._task = loop.create_task(self._run())

    def notify(self) -> None:
        """Something under .git changed (an editor notification): poll now, also when
        periodic polling is off."""
        if self._task is not None:
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
        repository with the recorded state)."""
        await self.poll()

    async def poll(self) -> int:
        """One poll; the number of events accepted."""
        if self._repo is None:
            return 0
        async with self._lock:
            # The idle case stays on the loop: a few stat calls cost less than a thread hop.
            assert self._signature is not None
            if self._recorded is not None and not self._signature.changed():
                return 0
            if self._recorded is not None and _rebase_in_progress(self._repo.info.git_dir):
                # Mid-rebase HEAD is detached on half-replayed commits: look again when the
                # rebase is over and report where it ended (the hooks see its end too).
                return 0
            loop = asyncio.get_running_loop()
            scan = await loop.run_in_executor(self._executor, self._scan, self._recorded)
            if scan is None:
                return 0
            results = await self._intake.submit_many(
                [Submission(Kind.GIT, payload, SOURCE_MODULE) for payload in scan.payloads]
            )
            for payload, result in zip(scan.payloads, results, strict=True):
                if not result.result.ok:
                    log.warning("git: %s rejected: %s", payload.get("commit_id"), result.result)
            if (scan.refs, scan.head_target) != (self._recorded, self._recorded_head):
                await self._writer.run(lambda conn: save_refs(conn, scan.refs, scan.head_target))
                self._recorded, self._recorded_head = scan.refs, scan.head_target
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
            return Scan(snapshot.refs, snapshot.head_target, [])
        if _rebase_in_progress(repo.info.git_dir):
            # Checked again after reading: a rebase that began since poll() looked may be
            # in this snapshot. Its state dir outlives every ref it moves, so checking after
            # the read cannot miss one. The next poll reads again.
            signature.invalidate()
            return None
        updates = diff_updates(repo, recorded, snapshot)
        if not updates:
            return Scan(snapshot.refs, snapshot.head_target, [])
        known = {value for name, value in recorded.items() if name != HEAD}
        payloads = git_events(
            repo, updates, known, message_lookup(repo), email_policy=self.email_policy
        )
        return Scan(snapshot.refs, snapshot.head_target, payloads)

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

    async def close(self) -> None:
        if self._once is not None:
            await asyncio.gather(self._once, return_exceptions=True)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        async with self._lock:
            if self._repo is not None:
                self._repo.close()
        self._executor.shutdown(wait=True)


def _start_state(
    conn: sqlite3.Connection, policy: EmailPolicy
) -> tuple[dict[str, str] | None, str | None]:
    events = EventLog(conn)
    events.set_meta(EMAIL_POLICY_KEY, policy)
    return load_refs(conn), events.get_meta(HEAD_KEY) or None


def _rebase_in_progress(git_dir: Path) -> bool:
    return (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir()

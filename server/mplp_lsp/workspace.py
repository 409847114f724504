"""One workspace folder: its store and owner, and the sources that feed it (editor, Git, inbox).

Front ends (the language server, ``mplp-lsp watch``) report file activity with
:meth:`Workspace.observe`; everything after that is shared. Nothing here imports pygls.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mplp_lsp.config import Resolved
from mplp_lsp.config.live import (
    Debounce,
    GitPolling,
    Ignore,
    Intake,
    LiveSettings,
    Logging,
    set_log_level,
)
from mplp_lsp.config.process import EDITOR_META_KEY, editor_record
from mplp_lsp.forward.service import Forwarding
from mplp_lsp.ignore import IgnoreRules
from mplp_lsp.intake import Submission
from mplp_lsp.owner import StoreOwner
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.runtime.drift import DriftMonitor
from mplp_lsp.runtime.drift.git_record import GitRepositoryRecord
from mplp_lsp.runtime.drift.scan import logged_not_applied, recorded_rows, recorded_under
from mplp_lsp.runtime.psg_files import FileChange
from mplp_lsp.settings import Settings
from mplp_lsp.sources.debounce import WATCHER, Change, Debouncer, Observation, Settled
from mplp_lsp.sources.disk_state import WATCHED, DiskState
from mplp_lsp.sources.files import LANGUAGE, TIMESTAMP, EditorDocuments, payload_for
from mplp_lsp.sources.fswatch import files_under
from mplp_lsp.sources.git import EMAIL_POLICY_KEY, GitSource
from mplp_lsp.sources.inbox import InboxSource
from mplp_lsp.sources.recorded import RecordedContent, graph_fingerprints, scratch_name
from mplp_lsp.statedir import StateDirLock, StatePaths, resolve_state_dir
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.salvage import ensure_usable
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.workspace_status import WorkspaceStatus, read_status

log = logging.getLogger(__name__)


class StateDirBusy(RuntimeError):
    """Another mplp-lsp process owns this state dir (one writer per store)."""

    def __init__(self, state_dir: Path, owner: dict[str, Any] | None) -> None:
        who = f"process {owner.get('pid')}" if owner else "another process"
        super().__init__(
            f"the state dir {state_dir} is in use by {who}; stop it, or give this one its own "
            "with --state-dir or MPLP_LSP_STATE_DIR"
        )
        self.state_dir = state_dir
        self.owner = owner


Prepare = Callable[["Workspace"], None]
_MAX_TICK = 0.001
_COMMIT_BATCH = 4096  # events per transaction at most: one fsync for a whole burst slice


class Workspace:
    def __init__(
        self,
        root: Path,
        settings: Settings,
        paths: StatePaths,
        lock: StateDirLock,
        writer: StoreWriter,
    ) -> None:
        self.root = root
        self.settings = settings
        self.paths = paths
        self._lock = lock
        self._writer = writer
        self.owner = StoreOwner(root, settings, paths, writer)
        self.bus = self.owner.bus
        self.intake = self.owner.intake
        self.error_log = self.owner.error_log
        self.file_nodes = self.owner.file_nodes
        self.git = GitSource(
            root,
            writer,
            self.intake,
            poll_interval=settings.git_poll_ms / 1000,
            email_policy=settings.git_author_email,
        )
        self.recorded = RecordedContent(
            root, graph=lambda paths: writer.read(lambda conn: graph_fingerprints(conn, paths))
        )
        self.inbox = InboxSource(paths.inbox, self.intake, screen=self._screen_handed)
        self.psg = self.owner.psg
        self.ignore = IgnoreRules(root, excludes=settings.exclude, internal_dirs=[paths.root])
        self.ignore_epoch = 0  # bumped whenever the ignore rules change
        self.drift = DriftMonitor(
            root,
            writer,
            self.intake,
            ignore=lambda: self.ignore,
            fresh_ignore=lambda: IgnoreRules(
                root, excludes=self.settings.exclude, internal_dirs=[paths.root]
            ),
            ignore_epoch=lambda: self.ignore_epoch,
            snapshot_cap=lambda: self.settings.snapshot_max_bytes,
            repository=GitRepositoryRecord(),
            sync_repository=self._sync_git,
            own_write=self.recorded.wrote,
        )
        self.file_nodes.on_applied(self.drift.applied)
        self.disk_state = DiskState(str(root))
        self.file_nodes.on_applied(self._graph_applied)
        self._rechecks: set[asyncio.Task[None]] = set()
        self._records: set[asyncio.Task[None]] = set()  # meta writes, awaited at close
        self._drift_task: asyncio.Task[None] | None = None
        self.documents = EditorDocuments()
        self.debouncer = self._new_debouncer(settings)
        self.ignored = 0
        self.opened_ns = time.time_ns()
        self.forwarding = Forwarding()
        self.live = LiveSettings(settings)
        self._subscribe()

    @classmethod
    async def open(
        cls,
        root: Path,
        settings: Settings,
        *,
        state_dir: str | Path | None = None,
        remote_url: str | None = None,
        prepare: Prepare | None = None,
    ) -> Workspace:
        """Open the folder's store (salvaging a damaged one) and start forwarding if configured.

        ``prepare`` is called before any source starts, so what it subscribes to the bus sees
        the events the start-up catch-up stores (Git operations made while nothing ran).
        """
        root = root.resolve()
        paths = StatePaths(resolve_state_dir(root, state_dir or settings.state_dir))
        lock = StateDirLock(paths.lock, workspace=root)
        if not lock.acquire():
            raise StateDirBusy(paths.root, lock.owner())
        writer = StoreWriter(paths.database, max_batch=_COMMIT_BATCH)
        try:
            # Under the lock, before the writer opens it: nobody else touches the file.
            await asyncio.to_thread(ensure_usable, paths.database)
            await writer.start()
        except BaseException:
            lock.release()
            raise
        workspace = cls(root, settings, paths, lock, writer)
        try:
            if prepare is not None:
                prepare(workspace)
            await workspace.owner.start()
            workspace.forwarding = await Forwarding.start(
                writer, workspace.bus, settings, remote_url
            )
            await workspace.inbox.start()
            await workspace.git.start()
            await workspace.drift.start()
            await workspace.drift.ensure_repository_record()
        except BaseException:
            await workspace.close()
            raise
        workspace._drift_task = asyncio.get_running_loop().create_task(
            workspace.drift.run_periodic(lambda: workspace.settings.drift_interval),
            name="drift-scans",
        )
        return workspace

    async def _sync_git(self) -> None:
        await self.git.sync()
        await self.owner.drain()  # the PSG applied what the poll reported

    @property
    def writer(self) -> StoreWriter:
        return self._writer

    def _new_debouncer(self, settings: Settings) -> Debouncer:
        return new_debouncer(self._emit, settings)

    def observe(
        self,
        change: Change,
        path: str,
        *,
        previous_path: str | None = None,
        origin: str = "editor",
        language: str | None = None,
    ) -> bool:
        """Report one raw change to a workspace-relative path; False if it is ignored."""
        admitted = admit(change, path, previous_path)
        if admitted is None:
            return False
        change, previous_path = admitted
        if path == ".git" or path.startswith(".git/"):
            self.git.notify()
        if path.rsplit("/", 1)[-1] == ".gitignore":
            self.ignore.invalidate(path)
            self.ignore_epoch += 1
        if self.ignore.is_ignored(path):
            self.ignored += 1
            return False
        self.debouncer.observe(observation(change, path, previous_path, origin, language))
        return True

    async def _emit(self, batch: list[Settled]) -> None:
        if DiskState.watched(batch):
            paths = DiskState.paths(batch)
            recorded = await self._writer.read(lambda conn: recorded_rows(conn, paths))
            batch = self.disk_state.settle(batch, recorded)
        batch = await screen_settled(batch, self.recorded, self.documents)
        root = str(self.root) if self.settings.send_workspace_root else None
        await self.intake.submit_many(file_submissions(batch, self.documents, root))

    async def _graph_applied(self, changes: Sequence[FileChange]) -> None:
        self.disk_state.applied(changes)

    def recheck_tree(self, directory: str) -> None:
        """Changes below ``directory`` ("" for all) may have gone unreported: look at every
        path the graph records there again (the disk decides when each settles)."""
        if not _utf8(directory):
            return  # a name that is not UTF-8 was never recorded (its files are refused)

        async def recheck() -> None:
            recorded = await self._writer.read(lambda conn: recorded_under(conn, directory))
            for path in (*recorded, *self.disk_state.pending_under(directory)):
                self.observe(Change.MODIFIED, path, origin=WATCHER)

        task = asyncio.get_running_loop().create_task(recheck(), name="mplp-recheck-tree")
        self._rechecks.add(task)
        task.add_done_callback(self._rechecks.discard)

    async def unrecorded_files(self, until_ns: int) -> list[str]:
        """The start-up catch-up: files on disk (absolute paths) that the graph has no node
        for and that appeared (their ctime) after the previous start began recording and not
        after ``until_ns`` (later ones are the live sources' to report). On the first start
        the tree as it was when this one opened is the baseline. Ignored directories
        are not entered; the caller's ``observe`` judges the files themselves."""

        def read(conn: sqlite3.Connection) -> tuple[str | None, set[str]]:
            known = set(recorded_under(conn, ""))
            for path, alive in logged_not_applied(conn).items():
                if alive:
                    known.add(path)
                else:
                    known.discard(path)
            return EventLog(conn).get_meta(_RECORDING_SINCE), known

        since, recorded = await self._writer.read(read)
        root = str(self.root)
        cut = len(root) + 1

        def walk(window: tuple[int, int], known: set[str]) -> list[str]:
            rules = IgnoreRules(
                self.root, excludes=self.settings.exclude, internal_dirs=[self.paths.root]
            )
            found = files_under(root, lambda path: rules.is_ignored(path[cut:] + "/"))
            return [p for p in found if p[cut:] not in known and _changed_within(p, *window)]

        after = self.opened_ns if since is None else int(since)
        new = await asyncio.to_thread(walk, (after, until_ns), recorded)
        opened = str(self.opened_ns)
        try:
            await self._writer.run(lambda conn: EventLog(conn).set_meta(_RECORDING_SINCE, opened))
        except sqlite3.Error as error:  # a full disk, say: the next start looks from further back
            log.warning("could not note when this catch-up started (%s)", error)
        return new

    async def _screen_handed(self, submissions: list[Submission]) -> list[Submission]:
        """File events another editor's server handed over: leave out what is recorded."""
        self.recorded.forget(
            path
            for s in submissions
            if s.kind is Kind.FILE_UPDATE
            and isinstance(s.data, dict)
            and s.data.get("change_type") in (Change.DELETED, Change.RENAMED)
            for path in (s.data.get("file_path"), s.data.get("previous_path"))
            if isinstance(path, str)
        )
        candidates = [
            s.data["file_path"]
            for s in submissions
            if s.kind is Kind.FILE_UPDATE and _settles_content(s.data)
        ]
        recorded = await self.recorded.screen(candidates)
        return [
            s
            for s in submissions
            if not (
                s.kind is Kind.FILE_UPDATE
                and _settles_content(s.data)
                and s.data["file_path"] in recorded
            )
        ]

    async def reject(
        self, source_module: str, kind: Kind, result: ValidationResult, data: Any
    ) -> None:
        """Record input a front end refused before it became an event (e.g. a path outside)."""
        await self.intake.reject(Submission(kind, data, source_module), result)

    def apply_settings(self, settings: Settings) -> None:
        """New settings take effect for activity observed from now on; each section is
        applied by the part it concerns (:mod:`mplp_lsp.config.live`), the rest is read
        where it is used. A changed setting that needs a restart is logged."""
        self.settings = settings
        for name in self.live.update(settings):
            log.warning("%s: the %s setting changed; it applies after a restart", self.root, name)

    def apply_config(self, resolved: Resolved) -> None:
        """:meth:`apply_settings`, and record what the editor set: processes without an editor
        (hooks, ``emit``) resolve the same configuration (:mod:`mplp_lsp.config.process`)."""
        self.apply_settings(resolved.settings)
        self._record_meta(EDITOR_META_KEY, editor_record(resolved.editor), "the editor settings")

    def _record_meta(self, key: str, value: str, what: str) -> None:
        async def write() -> None:
            try:
                await self._writer.run(lambda conn: _set_meta(conn, key, value))
            except sqlite3.Error as error:
                log.warning("could not record %s (%s)", what, error)

        task = asyncio.get_running_loop().create_task(write(), name=f"record {key}")
        self._records.add(task)
        task.add_done_callback(self._records.discard)

    def _subscribe(self) -> None:
        self.live.subscribe(Ignore, self._excludes_changed)
        self.live.subscribe(Debounce, self._debounce_changed)
        self.live.subscribe(GitPolling, self._git_changed)
        self.live.subscribe(Intake, lambda _new, _old: self.owner.apply_settings(self.settings))
        self.live.subscribe(Logging, lambda new, _old: set_log_level(new.log_level))

    def _excludes_changed(self, new: Ignore, _old: Ignore) -> None:
        self.ignore = self.ignore.with_excludes(new.exclude)
        self.ignore_epoch += 1

    def _debounce_changed(self, _new: Debounce, _old: Debounce) -> None:
        retired = self.debouncer
        self.debouncer = self._new_debouncer(self.settings)
        task = asyncio.get_running_loop().create_task(_retire(retired))
        _background.add(task)
        task.add_done_callback(_background.discard)

    def _git_changed(self, new: GitPolling, _old: GitPolling) -> None:
        self.git.poll_interval = new.git_poll_ms / 1000
        self.git.email_policy = new.git_author_email
        # Hooks report with the running daemon's policy (cli/git_hook.py).
        self._record_meta(EMAIL_POLICY_KEY, new.git_author_email, "the author email policy")

    async def settle(self) -> None:
        """Emit pending activity now and wait until it and its PSG updates are stored."""
        await self.debouncer.flush()
        await self.owner.drain()

    async def status(self) -> WorkspaceStatus:
        runtime = self.forwarding.runtime()
        return await self._writer.read(
            lambda conn: read_status(
                conn, self.paths, pending=self.debouncer.pending_count, forwarding=runtime
            )
        )

    async def close(self) -> None:
        """Commit pending activity, stop consumers, close the store, release the state dir."""
        try:
            # First, and bounded: with the remote down, pending entries simply stay queued.
            await self.forwarding.close()
            await self.git.close()
            await self.inbox.close()
            if self._rechecks or self._records:
                await asyncio.gather(*self._rechecks, *self._records, return_exceptions=True)
            await self.debouncer.flush()
            await self.debouncer.aclose()
            if self._drift_task is not None:
                self._drift_task.cancel()
                await asyncio.gather(self._drift_task, return_exceptions=True)
            await self.owner.close()
            await self.drift.close()
            await self._writer.close()
        finally:
            self._lock.release()


_background: set[asyncio.Task[None]] = set()
_CONTENT_CHANGES = (Change.CREATED, Change.MODIFIED)


def new_debouncer(emit: Callable[[list[Settled]], Any], settings: Settings) -> Debouncer:
    quiet = settings.debounce_ms / 1000
    return Debouncer(
        emit,
        quiet=quiet,
        max_wait=settings.max_wait_ms / 1000,
        # Batch what falls due together, but add at most 1 ms to an event's latency.
        tick=min(quiet / 10, _MAX_TICK),
    )


def observation(
    change: Change, path: str, previous_path: str | None, origin: str, language: str | None
) -> Observation:
    extra: dict[str, object] = {TIMESTAMP: utc_timestamp()}
    if origin == WATCHER:
        extra[WATCHED] = True
    if language:
        extra[LANGUAGE] = language
    return Observation(path, change, time.monotonic(), previous_path, origin, extra)


def admit(change: Change, path: str, previous_path: str | None) -> tuple[Change, str | None] | None:
    """The change as it may be recorded, or None: the daemon's scratch files never show.

    A scratch file renamed over its target (how a quick fix writes) is the target modified.
    """
    if scratch_name(path):
        return None
    if previous_path is not None and scratch_name(previous_path):
        return Change.MODIFIED, None
    return change, previous_path


async def screen_settled(
    batch: list[Settled], recorded: RecordedContent, documents: EditorDocuments
) -> list[Settled]:
    """Leave out created/modified paths whose content is already recorded (an echo)."""
    recorded.forget(_moved_or_gone(batch))
    candidates = [settled.path for settled in batch if settled.change in _CONTENT_CHANGES]
    echoes = await recorded.screen(candidates)
    if not echoes:
        return batch
    for path in echoes:
        documents.take_lines(path)  # the next event counts lines from this content
    return [s for s in batch if not (s.change in _CONTENT_CHANGES and s.path in echoes)]


def _moved_or_gone(batch: list[Settled]) -> list[str]:
    paths = []
    for settled in batch:
        if settled.change in (Change.DELETED, Change.RENAMED):
            paths.append(settled.path)
        if settled.previous_path is not None:
            paths.append(settled.previous_path)
    return paths


def file_submissions(
    batch: list[Settled], documents: EditorDocuments, workspace_root: str | None
) -> list[Submission]:
    """One ``file_update`` submission per settled change."""
    submissions = []
    for settled in batch:
        if settled.previous_path is not None:
            documents.renamed(settled.previous_path, settled.path)
        lines = documents.take_lines(settled.path) if settled.change is Change.MODIFIED else None
        if settled.change is Change.DELETED:
            documents.forget(settled.path)
        payload = payload_for(settled, lines=lines, workspace_root=workspace_root)
        if settled.change is not Change.DELETED and (lang := documents.language(settled.path)):
            payload["language"] = lang
        submissions.append(Submission(Kind.FILE_UPDATE, payload, "ide", trusted_paths=True))
    return submissions


def _settles_content(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("file_path"), str)
        and data.get("change_type") in _CONTENT_CHANGES
    )


# meta key: when the latest start began recording (ns since the epoch), for the next catch-up
_RECORDING_SINCE = "files_recording_since_ns"


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _changed_within(path: str, after_ns: int, until_ns: int) -> bool:
    """Whether the file's inode last changed (created, written, renamed) after ``after_ns``
    and not after ``until_ns``: ctime, because extractors and checkouts may set an old mtime,
    never an old ctime."""
    try:
        return after_ns < os.lstat(path).st_ctime_ns <= until_ns
    except OSError:
        return False


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    EventLog(conn).set_meta(key, value)


async def _retire(debouncer: Debouncer) -> None:
    """A replaced debouncer still delivers what it holds."""
    await debouncer.flush()
    await debouncer.aclose()

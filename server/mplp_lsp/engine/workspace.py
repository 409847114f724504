"""One workspace folder: its store and owner, and the sources that feed it (editor, Git, inbox).

Front ends (the language server, ``mplp-lsp watch``) report file activity with
:meth:`Workspace.observe`; everything after that is shared. Nothing here imports pygls.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from mplp_lsp.config import Resolved
from mplp_lsp.config.live import (
    Debounce,
    GitPolling,
    Ignore,
    LiveSettings,
    Logging,
    Recording,
    Remote,
    set_log_level,
)
from mplp_lsp.config.process import EDITOR_META_KEY, editor_record
from mplp_lsp.config.settings import Settings
from mplp_lsp.drift import DriftMonitor
from mplp_lsp.drift.git_record import GitRepositoryRecord
from mplp_lsp.engine.compaction import policy_of
from mplp_lsp.engine.file_activity import EDITOR_MODULE, FileActivity
from mplp_lsp.engine.file_catch_up import CatchUp
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.owner import StoreOwner
from mplp_lsp.engine.statedir import (
    StateDirLock,
    StatePaths,
    resolve_state_dir,
)
from mplp_lsp.engine.status import WorkspaceStatus, read_status
from mplp_lsp.forward.service import Forwarding
from mplp_lsp.ignore.live import LiveIgnore
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.sanitize.paths import PathRejected
from mplp_lsp.sources.debounce import Change
from mplp_lsp.sources.git import GitSource
from mplp_lsp.sources.inbox import InboxSource
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.salvage import ensure_usable
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.vcs.spool import Spool

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

    @property
    def folder(self) -> str | None:
        """The real path of the workspace its owner records, when it says."""
        named = self.owner.get("workspace") if self.owner else None
        return os.path.realpath(named) if isinstance(named, str) and named else None


Prepare = Callable[["Workspace"], None]
_COMMIT_BATCH = 4096  # events per transaction at most: one fsync for a whole burst slice


class Workspace:
    def __init__(
        self,
        root: Path,
        settings: Settings,
        paths: StatePaths,
        lock: StateDirLock,
        writer: StoreWriter,
        source_module: str = EDITOR_MODULE,
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
            spool=Spool(paths.git_spool),
        )
        self.ignore = LiveIgnore(root, settings.exclude, internal_dirs=[paths.root])
        self.live = LiveSettings(settings)
        self.files = FileActivity(
            root,
            settings,
            writer,
            self.intake.submit_many,
            self.ignore,
            catch_up=CatchUp(
                root,
                writer,
                self.intake.submit_many,
                self.ignore.fresh,
                snapshot_cap=lambda: self.live.current.snapshot_max_bytes,
                on_learnt=lambda: self.drift.graph_learnt(),
            ),
            git_activity=self.git.notify,
            busy=self.intake.busy,
            refuse=self._refuse,
            source_module=source_module,
        )
        self.documents = self.files.documents  # what the editor has open
        self.inbox = InboxSource(paths.inbox, self.intake, screen=self.files.screen_handed)
        self.psg = self.owner.psg
        self.drift = DriftMonitor(
            root,
            writer,
            self.intake,
            ignore=self.ignore.current,
            fresh_ignore=self.ignore.fresh,
            ignore_epoch=self.ignore.current_epoch,
            snapshot_cap=lambda: self.live.current.snapshot_max_bytes,
            repository=GitRepositoryRecord(),
            sync_repository=self._sync_git,
            own_write=self.files.recorded.wrote,
        )
        self.file_nodes.on_applied(self.drift.applied)
        self.file_nodes.on_applied(self.files.graph_applied)
        self._records: set[asyncio.Task[None]] = set()  # meta writes, refusals: awaited at close
        self._drift_task: asyncio.Task[None] | None = None
        self.forwarding = Forwarding()
        self._remote_url: str | None = None  # --remote of `serve`: over remoteUrl
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
        source_module: str = EDITOR_MODULE,
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
        workspace = cls(root, settings, paths, lock, writer, source_module)
        try:
            if prepare is not None:
                prepare(workspace)
            await workspace.owner.start()
            workspace._remote_url = remote_url
            workspace.forwarding = await Forwarding.start(
                writer, workspace.bus, settings, remote_url, root
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

    def observe(
        self,
        change: Change,
        path: str,
        *,
        previous_path: str | None = None,
        origin: str = "editor",
        language: str | None = None,
    ) -> bool | None:
        """Report one raw change to a workspace-relative path (:meth:`FileActivity.observe`)."""
        self.intake.prepare()  # its event will need the validators: compiled meanwhile
        return self.files.observe(
            change, path, previous_path=previous_path, origin=origin, language=language
        )

    def observe_many(self, changes: Sequence[tuple[Change, str]], *, origin: str) -> None:
        """Report a batch of raw changes in their order (:meth:`FileActivity.observe_many`)."""
        self.intake.prepare()
        self.files.observe_many(changes, origin=origin)

    def recheck_tree(self, directory: str) -> None:
        """Changes below ``directory`` ("" for all) may have gone unreported: look again."""
        self.files.recheck_tree(directory)

    async def reject(
        self, source_module: str, kind: Kind, result: ValidationResult, data: Any
    ) -> None:
        """Record input a front end refused before it became an event (e.g. a path outside)."""
        await self.intake.reject(Submission(kind, data, source_module), result)

    def _refuse(self, path: str, rejected: PathRejected) -> None:
        """A name listed from the disk that cannot be a path, refused like a reported one."""
        result = rejected.to_result("file_path")
        self._background(
            self.reject(self.files.source_module, Kind.FILE_UPDATE, result, {"file_path": path})
        )

    def apply_settings(self, settings: Settings) -> None:
        """New settings take effect for activity observed from now on; each section is
        applied by the part it concerns (:mod:`mplp_lsp.config.live`), the rest is read
        where it is used. A changed setting that needs a restart is logged."""
        self.settings = self.files.settings = settings
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

        self._background(write())

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._records.add(task)
        task.add_done_callback(self._records.discard)

    def _subscribe(self) -> None:
        self.live.subscribe(Ignore, self.ignore.excludes_changed)
        self.live.subscribe(Debounce, self.files.debounce_changed)
        self.live.subscribe(GitPolling, self._git_changed)
        self.live.subscribe(Recording, lambda _new, _old: self.owner.apply_settings(self.settings))
        self.live.subscribe(Logging, lambda new, _old: set_log_level(new.log_level))
        self.live.subscribe(Remote, lambda _new, _old: self._background(self._reforward()))

    async def _reforward(self) -> None:
        """Forward as the changed settings say: a new remote's queue is its own, what was
        queued for the previous one is held for it (docs/forwarding.md)."""
        log.info("%s: the forwarding settings changed; forwarding starts again", self.root)
        await self.forwarding.reconfigure(
            self._writer, self.bus, self.settings, self._remote_url, self.root
        )

    def _git_changed(self, new: GitPolling, _old: GitPolling) -> None:
        self.git.poll_interval = new.git_poll_ms / 1000
        self.git.email_policy = new.git_author_email

    async def settle(self) -> None:
        """Emit pending activity now and wait until it and its PSG updates are stored."""
        await self.files.flush()
        await self.owner.drain()

    async def status(self, *, retention: bool = False) -> WorkspaceStatus:
        """What the store holds and the daemon does; with ``retention``, also what retention
        holds to and would remove now (a read of the log's old end, for `mplp-lsp status`
        rather than the editor's status item, which asks twice a second while recording)."""
        runtime = self.forwarding.runtime()

        def query(conn: sqlite3.Connection) -> WorkspaceStatus:
            return read_status(
                conn,
                self.paths,
                pending=self.files.pending,
                forwarding=runtime,
                retention=policy_of(self.settings) if retention else None,
            )

        # A snapshot, never a read on the writer's thread: the editor's status item asks
        # while a 20,000-path burst commits, and waited behind it. The item's dozen small
        # queries run right here (graph.service.PsgService.read_now: on a thread they waited
        # for the GIL at each query); retention's read of the log's old end on a thread.
        if retention:
            return await self.psg.read(query)
        return self.psg.read_now(query)

    async def close(self) -> None:
        """Commit pending activity, stop consumers, close the store, release the state dir."""
        try:
            # First what the editors and the watcher reported: an editor that quits may kill
            # this process soon after (Neovim: SIGKILL 2 s after SIGTERM).
            await self.files.close()
            # Bounded: with the remote down, pending entries simply stay queued.
            await self.forwarding.close()
            await self.git.close()
            await self.inbox.close()
            if self._records:
                await asyncio.gather(*self._records, return_exceptions=True)
            if self._drift_task is not None:
                self._drift_task.cancel()
                await asyncio.gather(self._drift_task, return_exceptions=True)
            await self.owner.close()
            await self.drift.close()
            await self._writer.close()
        finally:
            self._lock.release()


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    EventLog(conn).set_meta(key, value)

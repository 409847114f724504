"""One workspace folder's engine: store, intake, bus, PSG file nodes, ignore rules, debouncer.

Front ends (the language server, ``mplp-lsp watch``) report file activity with
:meth:`Workspace.observe`; everything after that is shared. Nothing here imports pygls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mplp_lsp.bus import EventBus
from mplp_lsp.ignore import IgnoreRules
from mplp_lsp.intake import Intake, Submission
from mplp_lsp.protocol.envelope import FamilyForm, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.runtime.psg_files import FileNodes
from mplp_lsp.runtime.psg_service import PsgService
from mplp_lsp.settings import Settings
from mplp_lsp.sources.debounce import Change, Debouncer, Observation, Settled
from mplp_lsp.sources.files import LANGUAGE, TIMESTAMP, EditorDocuments, payload_for
from mplp_lsp.statedir import StateDirLock, StatePaths, resolve_state_dir
from mplp_lsp.store.errorlog import IntegrationErrorLog
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


CommitListener = Callable[[int], None]
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
        self.bus = EventBus()
        self.error_log = IntegrationErrorLog(paths.error_log)
        self.intake = Intake(writer, self.bus, self.error_log, root=root, family=_family(settings))
        self._files_executor = ThreadPoolExecutor(1, thread_name_prefix="mplp-files")
        self.file_nodes = FileNodes(root, writer, self.intake, self._files_executor)
        self.bus.subscribe("psg-files", self.file_nodes.handle, kinds={Kind.FILE_UPDATE.value})
        self.psg = PsgService(writer, self.intake)
        self.bus.subscribe("psg-ci", self.psg.handle_ci, kinds={Kind.CI.value})
        self.ignore = IgnoreRules(root, excludes=settings.exclude, internal_dirs=[paths.root])
        self.documents = EditorDocuments()
        self.debouncer = self._new_debouncer(settings)
        self.ignored = 0
        self._listeners: list[CommitListener] = []

    @classmethod
    async def open(
        cls, root: Path, settings: Settings, *, state_dir: str | Path | None = None
    ) -> Workspace:
        root = root.resolve()
        paths = StatePaths(resolve_state_dir(root, state_dir or settings.state_dir))
        lock = StateDirLock(paths.lock, workspace=root)
        if not lock.acquire():
            raise StateDirBusy(paths.root, lock.owner())
        writer = StoreWriter(paths.database, max_batch=_COMMIT_BATCH)
        try:
            await writer.start()
        except BaseException:
            lock.release()
            raise
        workspace = cls(root, settings, paths, lock, writer)
        try:
            await workspace.psg.start()
        except BaseException:
            await workspace.close()
            raise
        return workspace

    @property
    def writer(self) -> StoreWriter:
        return self._writer

    def _new_debouncer(self, settings: Settings) -> Debouncer:
        quiet = settings.debounce_ms / 1000
        return Debouncer(
            self._emit,
            quiet=quiet,
            max_wait=settings.max_wait_ms / 1000,
            # Batch what falls due together, but add at most 1 ms to an event's latency.
            tick=min(quiet / 10, _MAX_TICK),
        )

    def on_commit(self, listener: CommitListener) -> None:
        """Called with the number of file events committed after each debounced batch."""
        self._listeners.append(listener)

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
        if path.rsplit("/", 1)[-1] == ".gitignore":
            self.ignore.invalidate(path)
        if self.ignore.is_ignored(path):
            self.ignored += 1
            return False
        extra: dict[str, object] = {TIMESTAMP: utc_timestamp()}
        if language:
            extra[LANGUAGE] = language
        self.debouncer.observe(
            Observation(path, change, time.monotonic(), previous_path, origin, extra)
        )
        return True

    async def _emit(self, batch: list[Settled]) -> None:
        root = str(self.root) if self.settings.send_workspace_root else None
        submissions = []
        for settled in batch:
            if settled.previous_path is not None:
                self.documents.renamed(settled.previous_path, settled.path)
            lines = (
                self.documents.take_lines(settled.path)
                if settled.change is Change.MODIFIED
                else None
            )
            if settled.change is Change.DELETED:
                self.documents.forget(settled.path)
            payload = payload_for(settled, lines=lines, workspace_root=root)
            if settled.change is not Change.DELETED and (
                lang := self.documents.language(settled.path)
            ):
                payload["language"] = lang
            submissions.append(Submission(Kind.FILE_UPDATE, payload, "ide", trusted_paths=True))
        results = await self.intake.submit_many(submissions)
        committed = sum(1 for result in results if result.accepted)
        for listener in self._listeners:
            listener(committed)

    async def reject(
        self, source_module: str, kind: Kind, result: ValidationResult, data: Any
    ) -> None:
        """Record input a front end refused before it became an event (e.g. a path outside)."""
        await self.intake.reject(Submission(kind, data, source_module), result)

    def apply_settings(self, settings: Settings) -> None:
        """New settings take effect for activity observed from now on."""
        if settings.exclude != self.settings.exclude:
            self.ignore = self.ignore.with_excludes(settings.exclude)
        if (settings.debounce_ms, settings.max_wait_ms) != (
            self.settings.debounce_ms,
            self.settings.max_wait_ms,
        ):
            retired = self.debouncer
            self.debouncer = self._new_debouncer(settings)
            task = asyncio.get_running_loop().create_task(_retire(retired))
            _background.add(task)
            task.add_done_callback(_background.discard)
        self.intake.family = _family(settings)
        self.settings = settings

    async def settle(self) -> None:
        """Emit pending activity now and wait until it and its PSG updates are stored."""
        await self.debouncer.flush()
        await self.bus.drain()

    async def status(self) -> WorkspaceStatus:
        return await self._writer.read(
            lambda conn: read_status(conn, self.paths, pending=self.debouncer.pending_count)
        )

    async def close(self) -> None:
        """Commit pending activity, stop consumers, close the store, release the state dir."""
        try:
            await self.debouncer.flush()
            await self.debouncer.aclose()
            await self.bus.close()
            await self.psg.close()
            await self._writer.close()
        finally:
            self._files_executor.shutdown(wait=True)
            self._lock.release()


_background: set[asyncio.Task[None]] = set()


async def _retire(debouncer: Debouncer) -> None:
    """A replaced debouncer still delivers what it holds."""
    await debouncer.flush()
    await debouncer.aclose()


def _family(settings: Settings) -> FamilyForm:
    return FamilyForm.UPSTREAM if settings.event_family == "upstream" else FamilyForm.SPEC

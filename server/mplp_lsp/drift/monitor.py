"""Drift detection and reconciliation for one workspace (spec §6.5); no pygls here.

* Passive: after the PSG applied a batch of file_update events, the paths it touched are
  re-checked (O(N) in the batch, never the tree); a late event the PSG refused to apply is
  named in the finding.
* Active: a scan of every recorded file at start-up, every ``interval`` seconds and on demand;
  it runs on the monitor's own thread, can be cancelled, and reports progress.
* Repository: the PSG's recorded HEAD/branch against ``.git``.

Findings are stored (table ``psg_drift``) so ``mplp-lsp drift`` can read them while the
daemon runs, and every change of the findings is passed to the listeners (the LSP shell
turns them into diagnostics).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from mplp_lsp.drift import records
from mplp_lsp.drift.model import Drift, Reason, RepositoryDrift, Strategy
from mplp_lsp.drift.reconcile import (
    EventFor,
    OwnWrite,
    Proposal,
    Reconciler,
    Resolution,
    resolved_event,
)
from mplp_lsp.drift.repository import (
    MetaRepositoryRecord,
    RepositoryRecord,
    RepositoryState,
    git_dir,
    read_state,
)
from mplp_lsp.drift.scan import (
    Index,
    Progress,
    ScanResult,
    check,
    load_index,
    per_directory,
    recorded_rows,
)
from mplp_lsp.engine.intake import Intake, Submission
from mplp_lsp.graph.files import FileChange
from mplp_lsp.graph.graph_events import graph_id
from mplp_lsp.ignore.rules import IgnoreRules
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.reader import ReaderConnection
from mplp_lsp.store.writer import StoreWriter

log = logging.getLogger(__name__)

_REPOSITORY = "(repository)"  # what a repository drift's resolution names as its path
Listener = Callable[[records.Changes], None]


@dataclass(frozen=True, slots=True)
class ScanSummary:
    checked: int
    drifted: int
    cancelled: bool
    seconds: float
    repository: RepositoryDrift | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "drifted": self.drifted,
            "cancelled": self.cancelled,
            "seconds": round(self.seconds, 3),
            "repository": self.repository.to_json() if self.repository else None,
        }


class DriftMonitor:
    def __init__(
        self,
        root: Path,
        writer: StoreWriter,
        intake: Intake,
        *,
        ignore: Callable[[], IgnoreRules],
        fresh_ignore: Callable[[], IgnoreRules],
        ignore_epoch: Callable[[], int],
        snapshot_cap: Callable[[], int],
        repository: RepositoryRecord | None = None,
        sync_repository: Callable[[], Awaitable[None]] | None = None,
        own_write: OwnWrite | None = None,
    ) -> None:
        """``ignore``: the workspace's live rules (used on the event loop); ``fresh_ignore``:
        a new rule set for a scan thread, read from disk; ``ignore_epoch`` changes whenever
        the workspace's rules do, so a scan re-checks ignore verdicts only then;
        ``sync_repository`` brings the repository record up to date before a scan compares
        it (a commit made a moment ago is not drift); ``own_write`` is told what a quick fix
        is about to write (its echo from a file watcher is not an edit)."""
        self.root = root
        self._writer = writer
        self._intake = intake
        self._ignore = ignore
        self._fresh_ignore = fresh_ignore
        self._ignore_epoch = ignore_epoch
        self._repository = repository or MetaRepositoryRecord()
        self._sync_repository = sync_repository
        self._git_dir = git_dir(root)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="mplp-drift")
        self._reader = ReaderConnection(writer)
        self._index: Index | None = None  # recorded stat facts, kept in step with the PSG
        self._checked_epoch: int | None = None
        self._stale = False  # nodes were added behind the index's back
        self._dirty: set[str] | None = None  # paths re-recorded while a full scan runs
        self._scan: asyncio.Future[ScanSummary] | None = None
        self._cancel: threading.Event | None = None
        self._listeners: list[Listener] = []
        self._progress: list[Progress] = []
        self._reconciler = Reconciler(root, writer, snapshot_cap, own_write)
        self._graph_id: str | None = None
        self.drifts: dict[str, Drift] = {}
        self._in_editor: dict[str, Strategy] = {}  # resolutions waiting for the editor's save
        self._recording: set[asyncio.Task[None]] = set()

    # --- life cycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.drifts = await self._writer.read(lambda conn: records.load(conn))

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def on_progress(self, listener: Progress) -> None:
        """Called on the event loop with (checked, total) during scans, and once at the end."""
        self._progress.append(listener)

    def _report(self, done: int, total: int) -> None:
        for listener in self._progress:
            try:
                listener(done, total)
            except Exception:
                log.exception("drift progress listener failed")

    async def run_periodic(self, interval: Callable[[], float]) -> None:
        """The start-up scan, then one every ``interval()`` seconds (0: start-up only)."""
        await self.scan()
        while True:
            seconds = interval()
            if seconds <= 0:
                return
            await asyncio.sleep(seconds)
            await self.scan()

    async def close(self) -> None:
        self.cancel_scan()
        if self._recording:
            await asyncio.gather(*self._recording, return_exceptions=True)
        if self._scan is not None:
            await asyncio.gather(self._scan, return_exceptions=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._reader.close)
        self._executor.shutdown(wait=True)

    def _connection(self) -> sqlite3.Connection:
        """The monitor thread's read-only connection: scans never hold up the writer."""
        return self._reader.get()

    def graph_learnt(self) -> None:
        """Nodes were added without events (the baseline): a scan reloads them now (the
        start-up scan saw the graph before them), or the next one if one is running."""
        self._stale = True
        if self._scan is None or self._scan.done():
            self.scan()

    @property
    def open_drifts(self) -> dict[str, Drift]:
        return {path: d for path, d in self.drifts.items() if d.state == "open"}

    # --- active scan ------------------------------------------------------------------------

    def scan(self) -> asyncio.Future[ScanSummary]:
        """Scan every recorded file; a scan already running is joined, not repeated."""
        if self._scan is None or self._scan.done():
            loop = asyncio.get_running_loop()
            self._scan = loop.create_task(self._full_scan(), name="drift-scan")
        return asyncio.shield(self._scan)

    def cancel_scan(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    async def _full_scan(self) -> ScanSummary:
        loop = asyncio.get_running_loop()
        started = loop.time()
        epoch = self._ignore_epoch()
        if epoch != self._checked_epoch or self._stale:
            self._index = None  # the rules or the graph changed: reload every node, re-judge
            self._stale = False
        items = list(self._index.items()) if self._index is not None else None
        if self._sync_repository is not None and self._git_dir is not None:
            try:
                await self._sync_repository()
            except Exception:
                log.exception("drift: the repository record could not be brought up to date")
        self._dirty = set()
        self._cancel = cancel = threading.Event()

        def report(done: int, total: int) -> None:
            loop.call_soon_threadsafe(self._report, done, total)

        def work() -> tuple[Index | None, ScanResult, RepositoryDrift | None]:
            conn = self._connection()
            loaded = load_index(conn) if items is None else None
            scanned = list(loaded.items()) if loaded is not None else items or []
            ignored = per_directory(self._fresh_ignore().files_in) if loaded is not None else None
            outcome = check(
                str(self.root), scanned, conn, now=utc_timestamp(),
                is_ignored=ignored, cancel=cancel, progress=report,
            )  # fmt: skip
            return loaded, outcome, self._repository_check(conn)

        try:
            loaded, outcome, repository = await loop.run_in_executor(self._executor, work)
        finally:
            dirty, self._dirty, self._cancel = self._dirty or set(), None, None
            total = len(items) if items is not None else len(self._index or ())
            self._report(total, total)
        if loaded is not None:
            self._index = loaded
        if outcome.cancelled:
            return ScanSummary(outcome.checked, len(self.open_drifts), True, loop.time() - started)
        if loaded is not None:
            self._checked_epoch = epoch
        self._forget(outcome, keep=dirty)
        changes = await self._writer.run(
            lambda conn: records.store(conn, outcome, scope=None, keep=dirty)
        )
        self._publish(changes)
        if dirty:
            await self.recheck(dirty)
        return ScanSummary(
            outcome.checked, len(self.open_drifts), False, loop.time() - started, repository
        )

    def _forget(self, outcome: ScanResult, keep: Collection[str]) -> None:
        """Bring the in-memory index in line with what a check learnt."""
        assert self._index is not None
        for path in (*outcome.ignored, *outcome.missing_nodes):
            if path not in keep:
                self._index.pop(path, None)
        for path, disk in outcome.touched:
            if path not in keep:
                self._index[path] = (disk.size, disk.mtime_ns, disk.inode)

    def _repository_check(self, conn: sqlite3.Connection) -> RepositoryDrift | None:
        if self._git_dir is None:
            return None
        real = read_state(self._git_dir)
        recorded = self._repository.recorded(conn)
        if real is None or recorded is None or recorded == real:
            return None
        return RepositoryDrift(recorded.head, recorded.branch, real.head, real.branch)

    async def repository_drift(self) -> RepositoryDrift | None:
        """The repository's HEAD/branch against the recorded ones, now."""
        return await self._writer.read(self._repository_check)

    async def resolve_repository(self) -> Resolution:
        """The file system wins for the repository: its HEAD and branch become the recorded
        ones (the PSG's branch node takes its commit)."""
        state = await self.record_repository()
        if state is None:
            message = "the repository's HEAD cannot be read"
            return Resolution(_REPOSITORY, Strategy.FS, False, message)
        where = f"{state.branch or 'a detached HEAD'} at {(state.head or '?')[:12]}"
        return Resolution(_REPOSITORY, Strategy.FS, True, f"the PSG now records {where}")

    async def record_repository(self) -> RepositoryState | None:
        """Take the repository's real HEAD/branch as the recorded one (first start, or the
        user resolved a repository drift with "file system wins")."""
        if self._git_dir is None:
            return None
        state = read_state(self._git_dir)
        if state is not None:
            await self._writer.run(lambda conn: self._repository.record(conn, state))
        return state

    async def ensure_repository_record(self) -> None:
        if self._git_dir is None:
            return
        known = await self._writer.read(self._repository.recorded)
        if known is None:
            await self.record_repository()

    # --- passive check and O(N) re-check --------------------------------------------------

    async def applied(self, changes: Sequence[FileChange]) -> None:
        """The PSG applied these file changes: re-check exactly their paths."""
        late = {change.path: change.timestamp for change in changes}
        paths = {change.path for change in changes}
        paths.update(c.previous_path for c in changes if c.previous_path is not None)
        await self.recheck(paths, late=late)

    async def recheck(self, paths: Iterable[str], *, late: Mapping[str, str] = {}) -> None:
        wanted = set(paths)
        if not wanted:
            return
        if self._dirty is not None:
            self._dirty |= wanted
        is_ignored = self._ignore().ignored_many()
        ignored = {path for path in wanted if is_ignored(path)}
        checked = sorted(wanted - ignored)

        def work() -> tuple[Index, ScanResult]:
            conn = self._connection()
            rows = recorded_rows(conn, checked)
            outcome = check(str(self.root), list(rows.items()), conn, now=utc_timestamp())
            outcome.drifts = [_with_late_note(d, late.get(d.path)) for d in outcome.drifts]
            outcome.ignored = sorted(ignored)
            return rows, outcome

        rows, outcome = await asyncio.get_running_loop().run_in_executor(self._executor, work)
        if self._index is not None:
            for path in checked:
                if path in rows:
                    self._index[path] = rows[path]
                else:
                    self._index.pop(path, None)
            self._forget(outcome, keep=())
        changes = await self._writer.run(lambda conn: records.store(conn, outcome, scope=checked))
        self._publish(changes)

    def _publish(self, changes: records.Changes) -> None:
        if not changes:
            return
        for path, drift in changes.items():
            if drift is None:
                self.drifts.pop(path, None)
                if path in self._in_editor:
                    self._resolved_in_editor(path)
            else:
                self.drifts[path] = drift
        for listener in self._listeners:
            try:
                listener(changes)
            except Exception:
                log.exception("drift listener failed")

    # --- reconciliation -----------------------------------------------------------------

    async def propose(
        self, path: str, strategy: Strategy, editor_text: str
    ) -> Proposal | Resolution:
        """The text resolving ``path`` would give it, for an editor that has it open
        (:meth:`Reconciler.propose`); nothing is changed."""
        drift = self.drifts.get(path)
        if drift is None:
            return Resolution(path, strategy, False, f"{path} has no drift")
        loop = asyncio.get_running_loop()
        return await self._reconciler.propose(drift, strategy, editor_text, loop, self._executor)

    async def in_editor(self, path: str, strategy: Strategy, conflicts: int) -> Resolution:
        """An editor put a proposal in its buffer: the file changes when it is saved. The
        drift stays, saying so, until a re-check finds the file as the graph records it (the
        save of a restore), or the save's event is applied; then the resolution is recorded."""
        if conflicts:
            note = (
                f"the merge left {conflicts} conflict(s) marked in the editor; edit them, then "
                "save the file"
            )
        elif strategy is Strategy.PSG:
            note = "the recorded content is in the editor; save the file to restore it"
        else:
            note = "merged in the editor; save the file to keep the result"
        drift = self.drifts.get(path)
        if drift is not None:
            noted = replace(drift, note=note, state="open")
            await self._writer.run(lambda conn: records.put(conn, noted))
            self._publish({path: noted})
        self._in_editor[path] = strategy
        return Resolution(path, strategy, not conflicts, note, conflicts)

    async def resolve(self, path: str, strategy: Strategy) -> Resolution:
        self._in_editor.pop(path, None)
        drift = self.drifts.get(path)
        if drift is None:
            return Resolution(path, strategy, False, f"{path} has no drift")
        if strategy is Strategy.IGNORE:
            deferred = replace(drift, state="deferred")
            await self._writer.run(lambda conn: records.put(conn, deferred))
            self._publish({path: deferred})
            return Resolution(path, strategy, True, "deferred until the file changes again")
        loop = asyncio.get_running_loop()
        resolution = await self._reconciler.resolve(drift, strategy, loop, self._executor)
        stored = await self._writer.read(lambda conn: records.load(conn, [path]))
        self._publish({path: stored.get(path)})
        if resolution.event is not None:
            await self._record_resolution(resolution.event)
        await self.recheck([path])
        return resolution

    async def _record_resolution(self, event: EventFor) -> None:
        await self._intake.submit(
            Submission(Kind.GRAPH_UPDATE, event(await self._ensure_graph_id()), "psg")
        )

    def _resolved_in_editor(self, path: str) -> None:
        """A resolution an editor applied is complete: the file is as the graph records it."""
        strategy = self._in_editor.pop(path)
        task = asyncio.get_running_loop().create_task(
            self._record_resolution(resolved_event(path, strategy)), name="drift-resolved"
        )
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)

    async def _ensure_graph_id(self) -> str:
        if self._graph_id is None:
            self._graph_id = await self._writer.run(graph_id)
        return self._graph_id


def _with_late_note(drift: Drift, event_time: str | None) -> Drift:
    """Name a late event: one older than what the node records was not applied (spec §6.4)."""
    if event_time is None or drift.recorded_at is None or drift.reason is Reason.DELETED:
        return drift
    if _instant(event_time) < _instant(drift.recorded_at):
        return replace(drift, note=f"a late file_update from {event_time} was not applied")
    return drift


def _instant(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("z", "Z"))


__all__ = ["DriftMonitor", "ScanSummary"]

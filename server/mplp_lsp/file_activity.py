"""The file activity of one workspace: what editors and file watchers report, quieted,
screened and handed to the intake as ``file_update`` events.

Raw reports (:meth:`FileActivity.observe`) pass the ignore rules, wait out their quiet period
in the debouncer, are checked against the disk and the recorded content (an echo of what the
graph holds is not an edit), and become submissions. The start-up catch-up
(:meth:`FileActivity.unrecorded_files`) and the re-checks after lost reports live here too.
Built from the settings; what it needs of the rest of the workspace is passed in.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from mplp_lsp.config.live import Debounce
from mplp_lsp.ignore_judge import InOrderJudge
from mplp_lsp.intake import Submission
from mplp_lsp.live_ignore import LiveIgnore
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.runtime.drift.scan import logged_not_applied, recorded_rows, recorded_under
from mplp_lsp.runtime.psg.files import FileChange
from mplp_lsp.settings import Settings
from mplp_lsp.sources.debounce import WATCHER, Change, Debouncer, Observation, Settled
from mplp_lsp.sources.disk_state import WATCHED, DiskState
from mplp_lsp.sources.files import LANGUAGE, TIMESTAMP, EditorDocuments, payload_for
from mplp_lsp.sources.fswatch import files_under
from mplp_lsp.sources.recorded import RecordedContent, graph_fingerprints, scratch_name
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.writer import StoreWriter

log = logging.getLogger(__name__)

Submit = Callable[[list[Submission]], Awaitable[Any]]
_MAX_TICK = 0.001


class FileActivity:
    def __init__(
        self,
        root: Path,
        settings: Settings,
        writer: StoreWriter,
        submit: Submit,
        ignore: LiveIgnore,
        *,
        git_activity: Callable[[], None] = lambda: None,
    ) -> None:
        """``submit`` takes the settled changes' submissions (the intake's ``submit_many``);
        ``git_activity`` is told when something under ``.git`` changed."""
        self.root = root
        self.settings = settings
        self._writer = writer
        self._submit = submit
        self.ignore = ignore
        self._git_activity = git_activity
        self.recorded = RecordedContent(
            root, graph=lambda paths: writer.read(lambda conn: graph_fingerprints(conn, paths))
        )
        self.disk_state = DiskState(str(root))
        self.documents = EditorDocuments()
        self.debouncer = new_debouncer(self._emit, settings)
        self.ignored = 0
        self.judge = InOrderJudge(ignore.current, on_ignored=self._count_ignored)
        self.opened_ns = time.time_ns()
        self._rechecks: set[asyncio.Task[None]] = set()

    def observe(
        self,
        change: Change,
        path: str,
        *,
        previous_path: str | None = None,
        origin: str = "editor",
        language: str | None = None,
    ) -> bool | None:
        """Report one raw change to a workspace-relative path; False if it is ignored, None
        when that is decided once its ignore files are read (off the event loop)."""
        admitted = admit(change, path, previous_path)
        if admitted is None:
            return False
        change, previous_path = admitted
        if path == ".git" or path.startswith(".git/"):
            self._git_activity()
        if path.rsplit("/", 1)[-1] == ".gitignore":
            self.ignore.gitignore_changed(path)
        seen = observation(change, path, previous_path, origin, language)
        return self.judge.submit(path, lambda: self.debouncer.observe(seen))

    def _count_ignored(self) -> None:
        self.ignored += 1

    @property
    def pending(self) -> int:
        """Changes not yet emitted: waiting for their ignore verdict or their quiet period."""
        return self.debouncer.pending_count + self.judge.waiting

    async def _emit(self, batch: list[Settled]) -> None:
        if DiskState.watched(batch):
            paths = DiskState.paths(batch)
            recorded = await self._writer.read(lambda conn: recorded_rows(conn, paths))
            batch = self.disk_state.settle(batch, recorded)
        batch = await screen_settled(batch, self.recorded, self.documents)
        root = str(self.root) if self.settings.send_workspace_root else None
        await self._submit(file_submissions(batch, self.documents, root))

    async def graph_applied(self, changes: Sequence[FileChange]) -> None:
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
            rules = self.ignore.fresh()
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

    async def screen_handed(self, submissions: list[Submission]) -> list[Submission]:
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

    def debounce_changed(self, _new: Debounce, _old: Debounce | None = None) -> None:
        """The Debounce section's subscriber: a new debouncer; the old one still delivers
        what it holds."""
        retired = self.debouncer
        self.debouncer = new_debouncer(self._emit, self.settings)
        task = asyncio.get_running_loop().create_task(_retire(retired))
        _background.add(task)
        task.add_done_callback(_background.discard)

    async def flush(self) -> None:
        await self.judge.settled()
        await self.debouncer.flush()

    async def close(self) -> None:
        """Emit what is pending and stop."""
        if self._rechecks:
            await asyncio.gather(*self._rechecks, return_exceptions=True)
        await self.judge.settled()
        await self.debouncer.flush()
        await self.debouncer.aclose()


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

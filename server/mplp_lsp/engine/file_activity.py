"""The file activity of one workspace: what editors and file watchers report, quieted,
screened and handed to the intake as ``file_update`` events.

Raw reports (:meth:`FileActivity.observe`) pass the ignore rules, wait out their quiet period
in the debouncer, are decided by the disk and the graph (:mod:`mplp_lsp.sources.disk_state`),
checked against the recorded content (an echo of what the graph holds is not an edit), and
become submissions. The start-up catch-up with the graph's baseline
(:meth:`FileActivity.catch_up`, :mod:`mplp_lsp.engine.file_catch_up`) and the comparisons after lost
reports (:meth:`FileActivity.recheck_tree`, :mod:`mplp_lsp.engine.file_rescan`) end the same way.
Built from the settings; what it needs of the rest of the workspace is passed in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Final

from mplp_lsp.config.live import Debounce
from mplp_lsp.config.settings import Settings
from mplp_lsp.drift.scan import recorded_hashes, recorded_rows
from mplp_lsp.engine.file_catch_up import CatchUp
from mplp_lsp.engine.file_rescan import Rescans
from mplp_lsp.engine.intake import Submission
from mplp_lsp.graph.files import FileChange
from mplp_lsp.ignore.judge import InOrderJudge
from mplp_lsp.ignore.live import LiveIgnore
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.json_input import has_utf8_form
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sanitize.paths import PathRejected, check_name
from mplp_lsp.sources.debounce import EDITOR, WATCHER, Change, Debouncer, Observation, Settled
from mplp_lsp.sources.disk_state import WROTE, DiskState
from mplp_lsp.sources.files import LANGUAGE, TIMESTAMP, EditorDocuments, payload_for
from mplp_lsp.sources.recorded import (
    Fingerprint,
    RecordedContent,
    Stat,
    graph_fingerprints,
    scratch_name,
)
from mplp_lsp.sources.tree import SLICE, slices
from mplp_lsp.store.writer import StoreWriter

log = logging.getLogger(__name__)

Submit = Callable[[list[Submission]], Awaitable[Any]]
# Reported changes held (in their quiet period, or settled and not yet stored) before a
# watcher is asked to stop reading: what bounds memory in a mass deletion (about 1 KiB each).
BACKLOG_LIMIT = 8 * SLICE
Refuse = Callable[[str, PathRejected], None]
_EMIT_SLICE = 128  # settled windows decided at once: a few milliseconds of the event loop
# Slices handed to the intake and not yet stored: while one waits for its commit (an fsync),
# the event loop decides and checks the next ones instead of waiting with it (the main thread
# was idle for half of a 20,000-path burst). Bounds what a burst holds in memory.
_STORING = 4


# The source_module of the file events: the editor integration's, or the stand-alone watcher's.
EDITOR_MODULE: Final = "ide"
WATCH_MODULE: Final = "watch"


class FileActivity:
    def __init__(
        self,
        root: Path,
        settings: Settings,
        writer: StoreWriter,
        submit: Submit,
        ignore: LiveIgnore,
        *,
        catch_up: CatchUp,
        git_activity: Callable[[], None] = lambda: None,
        refuse: Refuse = lambda _path, _rejected: None,
        source_module: str = EDITOR_MODULE,
        busy: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        """``submit`` takes the settled changes' submissions (the intake's ``submit_many``);
        ``catch_up`` learns the baseline at start; ``git_activity`` is told when something
        under ``.git`` changed; ``refuse`` records a listed name that cannot be a path;
        ``busy`` is held while settled changes are decided (the intake's ``busy``)."""
        self.root = root
        self.settings = settings
        self._writer = writer
        self._submit = submit
        self._busy = busy
        self.ignore = ignore
        self._git_activity = git_activity
        self._refuse = refuse
        self.source_module = source_module
        self.recorded = RecordedContent(
            root, graph=lambda paths: writer.read(lambda conn: graph_fingerprints(conn, paths))
        )
        self.disk_state = DiskState(str(root))
        self.documents = EditorDocuments()
        self.debouncer = new_debouncer(self._emit, settings)
        self.ignored = 0
        self.judge = InOrderJudge(ignore.current, on_ignored=self._count_ignored)
        self.opened_ns = time.time_ns()
        self._catch_up = catch_up
        # Set while the graph learns its baseline: until then, no window can be decided.
        self._learning: asyncio.Future[None] | None = None
        self._catching: asyncio.Task[None] | None = None
        self.rescans = Rescans(
            str(root),
            writer,
            self.settle_now,
            ignore.fresh,
            pending_under=self.disk_state.pending_under,
        )

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
        self._noticed(path)
        seen = observation(change, path, previous_path, origin, language)
        return self.judge.submit(path, lambda: self.debouncer.observe(seen))

    def observe_many(self, changes: Sequence[tuple[Change, str]], *, origin: str) -> None:
        """:meth:`observe` of each (change, path), in order, judged and quieted as one batch:
        the observations of one report share its time."""
        at, stamp = time.monotonic(), utc_timestamp()
        extras: dict[Change, dict[str, object]] = {}  # never changed: shared by a batch
        seen = []
        for change, path in changes:
            if scratch_name(path):
                continue
            self._noticed(path)
            if (extra := extras.get(change)) is None:
                extra = extras[change] = reported_extra(change, origin, None, stamp)
            seen.append((path, Observation(path, change, at, None, origin, extra)))
        self.judge.submit_many(seen, self._quieted)

    def _quieted(self, observations: list[Observation]) -> None:
        self.debouncer.observe_many(observations)

    def _noticed(self, path: str) -> None:
        """What a change of ``path`` tells beyond itself: Git activity, new ignore rules."""
        if path == ".git" or path.startswith(".git/"):
            self._git_activity()
        if path.rsplit("/", 1)[-1] == ".gitignore":
            self.ignore.gitignore_changed(path)

    def _count_ignored(self) -> None:
        self.ignored += 1

    @property
    def pending(self) -> int:
        """Changes not yet emitted: waiting for their ignore verdict or their quiet period."""
        return self.debouncer.pending_count + self.judge.waiting

    @property
    def saturated(self) -> bool:
        """Holding as much as it should: a watcher stops reading until this drains, and the
        kernel keeps the rest (its overflow then makes a comparison, a slice at a time)."""
        return self.debouncer.backlog + self.judge.waiting > BACKLOG_LIMIT

    def will_catch_up(self) -> None:
        """A catch-up is coming (it waits for the folder's watches): until it has run,
        :meth:`learnt` waits, so nobody takes the folder for recorded before it is watched."""
        if self._learning is None:
            self._learning = asyncio.get_running_loop().create_future()

    async def learnt(self) -> None:
        """Wait until the graph knows the files that were there (the catch-up's baseline)."""
        if self._learning is not None:
            await asyncio.shield(self._learning)

    async def _emit(self, batch: list[Settled]) -> None:
        await self.learnt()  # the graph must know what was there
        # Busy from here: the graph's work on earlier events waits (Intake.quiet) instead of
        # taking the store's writer between this batch's reads and its commit.
        with self._busy():
            # A slice at a time, so no step holds the event loop long; slices are decided
            # and checked while those before them commit (up to _STORING in flight, handed
            # to the intake in order: the writer commits them in that order, merging what
            # queues up into one transaction).
            storing: deque[asyncio.Future[Any]] = deque()
            try:
                for start in range(0, len(batch), _EMIT_SLICE):
                    submissions = await self._decide(batch[start : start + _EMIT_SLICE])
                    if len(storing) == _STORING:
                        await storing.popleft()
                    storing.append(asyncio.ensure_future(self._submit(submissions)))
                while storing:
                    await storing.popleft()
            finally:
                # After a failure (the batch is reported lost), what is in flight still ends
                # before the intake is quiet again.
                await asyncio.gather(*storing, return_exceptions=True)

    async def _decide(self, batch: list[Settled]) -> list[Submission]:
        """The file events of a slice of settled windows: decided by the disk and the graph,
        less what is already recorded. The disk is asked once per path, off the event loop,
        with the graph's facts; deciding and screening share the answer."""
        with self.disk_state.reading():
            paths = DiskState.paths(batch)
            sources = DiskState.renamed_from(batch)
            look = self.disk_state.look
            recorded, hashes, disk, graph = await self._writer.read(
                lambda conn: (
                    recorded_rows(conn, paths),
                    recorded_hashes(conn, sources),
                    look(paths),
                    graph_fingerprints(conn, paths),
                )
            )
            decided = self.disk_state.settle(batch, recorded, hashes, disk)
        self._look_below()
        batch = await screen_settled(decided, self.recorded, self.documents, disk, graph)
        root = root_sent(self.root, self.settings)
        return file_submissions(batch, self.documents, root, self.source_module)

    def _look_below(self) -> None:
        """A path gone that was never a file here may have been a directory (an editor's
        watcher reports a deleted folder as one path): compare what the graph holds below."""
        gone, self.disk_state.gone_unknown = self.disk_state.gone_unknown, []
        for path in gone:
            self.recheck_tree(path)

    async def settle_now(self, paths: list[str]) -> None:
        """Decide these paths by the disk and the graph now, as windows that closed, and
        store the result (a slice of a rescan or of the catch-up). Paths with activity
        waiting in the debouncer are left to it, and so are files changed within the quiet
        period (being written, maybe: their window settles once they are quiet)."""
        stamp = utc_timestamp()
        now = time.monotonic()
        recent = time.time_ns() - self.settings.debounce_ms * 1_000_000
        batch = []
        for path in paths:
            try:
                check_name(path)
            except PathRejected as rejected:
                self._refuse(path, rejected)
                continue
            if self.debouncer.holds(path) or scratch_name(path):
                continue
            if _changed_after(self.root / path, recent):
                self.observe(Change.MODIFIED, path, origin=WATCHER)
            else:
                batch.append(Settled(path, Change.MODIFIED, None, now, now, 1, {TIMESTAMP: stamp}))
        if batch:
            await self._emit(batch)

    async def graph_applied(self, changes: Sequence[FileChange]) -> None:
        self.disk_state.applied(changes)

    def recheck_tree(self, directory: str) -> None:
        """Changes below ``directory`` ("" for all) may have gone unreported: compare it with
        the graph, a slice at a time (:mod:`mplp_lsp.engine.file_rescan`)."""
        if has_utf8_form(directory):  # a name that is not UTF-8 was never recorded
            self.rescans.request(directory)

    def catch_up(self, heard_ns: int, until_ns: int) -> asyncio.Task[None]:
        """Start the start-up catch-up (:mod:`mplp_lsp.engine.file_catch_up`): no window is decided
        until the graph knows the files that were there; the files changed while nothing
        recorded are then decided like reports, a slice at a time. ``heard_ns``: since when
        this process could hear of the folder's changes."""
        loop = asyncio.get_running_loop()
        if self._learning is None:
            self._learning = loop.create_future()
        learning = self._learning

        async def run() -> None:
            try:
                outcome = await self._catch_up.run(self.opened_ns, heard_ns, until_ns)
            finally:
                if not learning.done():
                    learning.set_result(None)
                if self._learning is learning:
                    self._learning = None
            for chunk in slices(iter(outcome.changed)):
                await self.settle_now(chunk)

        self._catching = loop.create_task(run(), name="mplp-files-catch-up")
        return self._catching

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
        """Emit what is pending and stop: what was reported is stored before this returns,
        first of all (then the catch-up and comparisons under way finish, and what they
        handed to the debouncer is stored too)."""
        if self._catching is None and self._learning is not None and not self._learning.done():
            self._learning.set_result(None)  # closed before its watches were in place
        await self.flush()
        if self._catching is not None:
            await asyncio.gather(self._catching, return_exceptions=True)
        await self.rescans.idle()
        await self.flush()
        await self.debouncer.aclose()


_background: set[asyncio.Task[None]] = set()
_CONTENT_CHANGES = (Change.CREATED, Change.MODIFIED)


def new_debouncer(emit: Callable[[list[Settled]], Any], settings: Settings) -> Debouncer:
    quiet = settings.debounce_ms / 1000
    return Debouncer(
        emit,
        quiet=quiet,
        max_wait=settings.max_wait_ms / 1000,
    )


def observation(
    change: Change, path: str, previous_path: str | None, origin: str, language: str | None
) -> Observation:
    extra = reported_extra(change, origin, language, utc_timestamp())
    return Observation(path, change, time.monotonic(), previous_path, origin, extra)


def reported_extra(
    change: Change, origin: str, language: str | None, stamp: str
) -> dict[str, object]:
    """What an observation carries besides its path and change (``stamp``: when reported)."""
    extra: dict[str, object] = {TIMESTAMP: stamp}
    if origin == EDITOR and change in _CONTENT_CHANGES:
        extra[WROTE] = True  # the editor's word that it wrote the file
    if language:
        extra[LANGUAGE] = language
    return extra


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
    batch: list[Settled],
    recorded: RecordedContent,
    documents: EditorDocuments,
    disk: Mapping[str, Stat | None] | None = None,
    graph: Mapping[str, Fingerprint] | None = None,
) -> list[Settled]:
    """Leave out created/modified paths whose content is already recorded (an echo);
    ``disk`` and ``graph``: what the disk and the graph held at the paths when they were
    decided (read together, in one visit to the store)."""
    recorded.forget(_moved_or_gone(batch))
    candidates = [settled.path for settled in batch if settled.change in _CONTENT_CHANGES]
    echoes = await recorded.screen(candidates, disk, graph)
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


def root_sent(root: Path, settings: Settings) -> str | None:
    """The ``workspace_root`` file events carry (``sendWorkspaceRoot``). A folder whose name
    is not UTF-8 has none that can be stored or sent: its events go without it rather than
    being refused (the intake's ``text_not_unicode``)."""
    text = str(root)
    return text if settings.send_workspace_root and has_utf8_form(text) else None


def file_submissions(
    batch: list[Settled],
    documents: EditorDocuments,
    workspace_root: str | None,
    source_module: str = EDITOR_MODULE,
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
        submissions.append(Submission(Kind.FILE_UPDATE, payload, source_module, trusted_paths=True))
    return submissions


def _settles_content(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("file_path"), str)
        and data.get("change_type") in _CONTENT_CHANGES
    )


def _changed_after(path: Path, ns: int) -> bool:
    try:
        return path.lstat().st_ctime_ns > ns
    except OSError:
        return False


async def _retire(debouncer: Debouncer) -> None:
    """A replaced debouncer still delivers what it holds."""
    await debouncer.flush()
    await debouncer.aclose()

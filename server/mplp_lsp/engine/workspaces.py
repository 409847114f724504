"""All open workspaces of one daemon, and routing of raw paths and URIs to them.

Each workspace folder has its own store (one database per workspace). Input is routed to
the deepest folder that contains it, after the sanitiser has resolved symlinks; anything
else is refused with a stable code and counted.

A folder whose store another process owns (a second editor on it) is *followed*
(:mod:`mplp_lsp.engine.follower`): its activity is handed to the owner, and the store is opened here
once the owner lets go; ``on_promoted`` listeners then attach to the new workspace. Owned
folders may be watched here too (``watch``), with the engine of ``mplp-lsp watch``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import unquote

from mplp_lsp.config import Resolved
from mplp_lsp.config.live import ConfigFileWatch, set_log_level
from mplp_lsp.config.settings import Settings
from mplp_lsp.config.sources import config_files
from mplp_lsp.engine.file_activity import EDITOR_MODULE
from mplp_lsp.engine.folder_watch import FolderWatch
from mplp_lsp.engine.workspace import Prepare, StateDirBusy, Workspace
from mplp_lsp.process.start import STARTED_NS
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.sanitize.paths import PathRejected, is_inside, relative_path, relative_paths
from mplp_lsp.sanitize.redact import redact
from mplp_lsp.sources.debounce import WATCHER, Change
from mplp_lsp.sources.temp_names import is_temp_name

if TYPE_CHECKING:
    from mplp_lsp.engine.follower import Follower

log = logging.getLogger(__name__)

Reconfigure = Callable[[Path], Awaitable[Resolved]]
# Where a path goes: the folder recorded or followed, and the path relative to its root.
Route: TypeAlias = "tuple[Workspace | Follower, str]"

# The longest tick of the kernel's coarse clock that file times come from (Linux, HZ=100).
_COARSE_CLOCK_NS = 10_000_000


class Workspaces:
    def __init__(
        self,
        *,
        state_dir: str | Path | None = None,
        remote_url: str | None = None,
        follow: bool = True,
        reconfigure: Reconfigure | None = None,
        watch: bool = False,
        source_module: str = EDITOR_MODULE,
    ) -> None:
        """``follow=False``: a folder whose store is busy raises StateDirBusy instead.
        ``reconfigure``: how to resolve a folder's configuration again; with it, each owned
        folder's settings files are watched and a change is applied while running.
        ``watch``: each owned folder is watched by the file-system watcher
        (:mod:`mplp_lsp.engine.folder_watch`); its start-up catch-up begins once the watches are
        in place."""
        self._follow_busy = follow
        self._watch_disk = watch
        self._watches: dict[Path, FolderWatch] = {}
        self._by_root: dict[Path, Workspace] = {}
        self._state_dir = state_dir
        self._remote_url = remote_url
        self._source_module = source_module  # of the file events: the editor's, or watch's
        self._background: set[asyncio.Task[None]] = set()
        self._followers: dict[Path, Follower] = {}
        self._following: dict[Path, asyncio.Task[None]] = {}
        self._promoted: list[Callable[[Workspace], Awaitable[None]]] = []
        self._reconfigure = reconfigure
        self._config_watches: dict[Path, ConfigFileWatch] = {}
        self._heard: dict[Path, int] = {}  # since when this process hears of each folder
        self.refused = 0

    def __iter__(self) -> Iterator[Workspace]:
        return iter(list(self._by_root.values()))

    def __len__(self) -> int:
        return len(self._by_root)

    @property
    def roots(self) -> tuple[Path, ...]:
        return tuple(self._by_root)

    @property
    def followers(self) -> tuple[Follower, ...]:
        """Folders whose store another process owns; their activity is handed to it."""
        return tuple(self._followers.values())

    def on_promoted(self, listener: Callable[[Workspace], Awaitable[None]]) -> None:
        """Called with the workspace when a followed folder's store was taken over here."""
        self._promoted.append(listener)

    async def add(
        self,
        root: Path,
        settings: Settings | Resolved,
        *,
        prepare: Prepare | None = None,
        catch_up: bool = True,
        named_ns: int | None = None,
    ) -> Workspace | Follower:
        """Open the folder's store and, unless told not to, start its :meth:`catch_up`; or
        follow its owner when another process has the store. Given a :class:`Resolved`
        configuration, the log level is set from it and the editor's part is recorded.
        ``named_ns``: when a folder added while running was named to this process (by
        default the folder was named at its start, and is heard of since then)."""
        resolved = settings if isinstance(settings, Resolved) else None
        if isinstance(settings, Resolved):
            settings = settings.settings
            set_log_level(settings.log_level)
        root = root.resolve()
        if root in self._by_root:
            return self._by_root[root]
        if root in self._followers:
            return self._followers[root]
        self._heard.setdefault(root, STARTED_NS if named_ns is None else named_ns)
        # An explicit --state-dir can serve one folder only: one store per workspace.
        state_dir = self._state_dir if not self._by_root and not self._followers else None
        try:
            workspace = await self._open(root, settings, state_dir, prepare)
        except StateDirBusy as busy:
            if not self._follow_busy:
                raise
            from mplp_lsp.engine.follower import Follower
            from mplp_lsp.engine.statedir import StatePaths

            follower = Follower(root, settings, StatePaths(busy.state_dir), busy.owner)
            self._followers[root] = follower
            self._nest()
            self._following[root] = asyncio.get_running_loop().create_task(
                self._follow(follower, state_dir), name=f"follow {root.name}"
            )
            log.info("%s: its store is owned by pid %s; following it", root, follower.owner_pid)
            return follower
        self._by_root[root] = workspace
        self._nest()
        self._owned(workspace, resolved)
        self._start_recording(workspace, catch_up=catch_up)
        return workspace

    def _start_recording(self, workspace: Workspace, *, catch_up: bool) -> None:
        """The catch-up, after the folder's watches are in place when it is watched."""

        def start() -> None:
            if catch_up:
                self.catch_up(workspace)

        if self._watch_disk:
            if catch_up:
                workspace.files.will_catch_up()
            self._watches[workspace.root] = FolderWatch(self, workspace, ready=start)
        else:
            start()

    def watch(self) -> None:
        """Watch every owned folder from now on (and those opened later)."""
        self._watch_disk = True
        for root, workspace in self._by_root.items():
            if root not in self._watches:
                self._watches[root] = FolderWatch(self, workspace, ready=lambda: None)

    async def _open(
        self,
        root: Path,
        settings: Settings,
        state_dir: str | Path | None,
        prepare: Prepare | None = None,
    ) -> Workspace:
        """Open the folder's store. A state dir is this folder's or another's
        (:func:`~mplp_lsp.engine.statedir.belongs_to`); when another folder's process locked it
        between that look and the lock, it names that folder by now, and a second try opens
        this folder's own. Busy with this folder's owner: :class:`StateDirBusy`."""
        open_it = partial(
            Workspace.open,
            root,
            settings,
            state_dir=state_dir,
            remote_url=self._remote_url,
            prepare=prepare,
            source_module=self._source_module,
        )
        try:
            return await open_it()
        except StateDirBusy as busy:
            if busy.folder in (None, str(root)):
                raise
            return await open_it()

    def _owned(self, workspace: Workspace, resolved: Resolved | None) -> None:
        """A store opened here: record its editor settings, watch its settings files."""
        if resolved is not None:
            workspace.apply_config(resolved)
        if self._reconfigure is None:
            return
        root = workspace.root

        async def changed() -> None:
            assert self._reconfigure is not None
            fresh = await self._reconfigure(root)
            if (owner := self._by_root.get(root)) is not None:
                log.info("%s: settings files changed; applying", root)
                owner.apply_config(fresh)

        watch = ConfigFileWatch(config_files(root), changed)
        watch.start()
        self._config_watches[root] = watch

    def catch_up(self, workspace: Workspace) -> None:
        """Start the catch-up (:mod:`mplp_lsp.engine.file_catch_up`): the graph learns the files
        that were there (its baseline), and files created while nothing recorded become
        ``created`` events (recorded files that changed are the start-up drift scan's). A
        file watcher of the daemon's own starts it once its watches are in place, so nothing
        falls between; what changes from this call on is the live sources' to report. A
        first start's baseline is cut when this process began to hear of the folder (its
        start, for the folders it was started with): a file saved while it started is a
        change, not a file that was there."""
        heard = self._heard.get(workspace.root, STARTED_NS)
        # A file's ctime comes from the kernel's coarse clock, which lags this one by up to a
        # tick: a file written just after this call may look a little older than it.
        until = time.time_ns() - _COARSE_CLOCK_NS
        self._track(_reported(workspace.files.catch_up(heard, until)))

    def _nest(self) -> None:
        """Each folder leaves the folders inside it to their own store."""
        roots = [*self._by_root, *self._followers]
        for root, workspace in self._by_root.items():
            workspace.ignore.nested_changed(
                [other for other in roots if other != root and is_inside(other, root)]
            )

    def _track(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _follow(self, follower: Follower, state_dir: str | Path | None) -> None:
        """Take the store over as soon as its owner lets go."""
        from mplp_lsp.engine.follower import TAKEOVER_POLL

        root = follower.root
        while True:
            await asyncio.sleep(TAKEOVER_POLL)
            if not follower.owner_gone():
                continue
            try:
                workspace = await self._open(root, follower.settings, state_dir)
            except StateDirBusy:
                continue  # someone else was quicker: keep handing over, to them now
            except Exception:
                log.exception("%s: could not take the store over; still following", root)
                continue
            break
        # Routed here from now on; what the follower still holds goes to the inbox, which
        # the new workspace drains.
        self._by_root[root] = workspace
        self._followers.pop(root, None)
        self._following.pop(root, None)
        await follower.close()
        log.info("%s: took the store over from pid %s", root, follower.owner_pid)
        self._owned(workspace, None)
        self._start_recording(workspace, catch_up=True)
        for listener in self._promoted:
            try:
                await listener(workspace)
            except Exception:
                log.exception("%s: a listener of the take-over failed", root)

    async def remove(self, root: Path) -> None:
        root = root.resolve()
        self._heard.pop(root, None)
        following = self._following.pop(root, None)
        if following is not None:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
        follower = self._followers.pop(root, None)
        if follower is not None:
            await follower.close()
        watching = self._watches.pop(root, None)
        if watching is not None:
            await watching.close()
        watch = self._config_watches.pop(root, None)
        if watch is not None:
            await watch.close()
        workspace = self._by_root.pop(root, None)
        self._nest()
        if workspace is not None:
            await workspace.close()

    def locate(self, raw: str | Path) -> tuple[Workspace, str]:
        """The workspace that owns a path or ``file:`` URI, and the path relative to it."""
        root, relative = relative_path(str(raw), self.roots)
        return self._by_root[root], relative

    def route(self, raw: str | Path, *, follow_leaf: bool = True) -> Route:
        """Like :meth:`locate`, followed folders included (where editor activity goes)."""
        roots = (*self._by_root, *self._followers)
        root, relative = relative_path(str(raw), roots, follow_leaf=follow_leaf)
        return self._by_root.get(root) or self._followers[root], relative

    def observe(
        self,
        change: Change,
        raw: str | Path,
        *,
        previous: str | Path | None = None,
        origin: str = "editor",
        language: str | None = None,
        routed: Route | None = None,
    ) -> bool | None:
        """Route one raw change; a refused path is counted and logged as an integration error.
        The answer is the workspace's (False: ignored, None: judged later). ``routed``: the
        route of ``raw`` a caller found just now (an editor's save routes its document once).

        Other programs' temporary names (:mod:`~mplp_lsp.sources.temp_names`) are judged by
        the name as reported, before routing resolves links: Emacs's ``.#name`` lock is a
        link to ``user@host.pid``, which must not become a path either. A temporary file
        renamed over its target is that target modified. Every front end and every folder,
        owned or followed, goes through this one filter.

        A watcher's report names a directory entry: a link there is the link, not the file
        it points to (an editor's names the document it wrote).
        """
        if is_temp_name(_reported_name(raw)):
            return False
        if previous is not None and is_temp_name(_reported_name(previous)):
            change, previous = Change.MODIFIED, None
        leaf = origin != WATCHER
        try:
            workspace, path = routed or self.route(raw, follow_leaf=leaf)
            previous_path = None
            if previous is not None:
                previous_workspace, previous_path = self.route(previous, follow_leaf=leaf)
                if previous_workspace is not workspace:
                    # moved between folders: gone from one, new in the other
                    previous_workspace.observe(Change.DELETED, previous_path, origin=origin)
                    change, previous_path = Change.CREATED, None
        except PathRejected as rejected:
            self.refuse(raw, rejected)
            return False
        return workspace.observe(
            change, path, previous_path=previous_path, origin=origin, language=language
        )

    def observe_many(self, reports: Sequence[tuple[Change, str]], *, origin: str) -> None:
        """Route a batch of raw changes (no renames) in their order: :meth:`observe` of each,
        with the paths of one directory resolved once (:func:`relative_paths`) and each
        folder's share handed on at once. A watcher's burst names thousands of files."""
        reported = [report for report in reports if not is_temp_name(_reported_name(report[1]))]
        roots = (*self._by_root, *self._followers)
        outcomes = relative_paths(
            [str(raw) for _, raw in reported], roots, follow_leaf=origin != WATCHER
        )
        routed: dict[Path, list[tuple[Change, str]]] = {}
        for (change, raw), outcome in zip(reported, outcomes, strict=True):
            if isinstance(outcome, PathRejected):
                self.refuse(raw, outcome)
            else:
                routed.setdefault(outcome[0], []).append((change, outcome[1]))
        for root, changes in routed.items():
            (self._by_root.get(root) or self._followers[root]).observe_many(changes, origin=origin)

    def refuse(self, raw: str | Path, rejected: PathRejected) -> None:
        """Counted here, and logged in the first workspace's integration error log."""
        self.refused += 1
        log.warning("refused path %r: %s", redact(str(raw)[:200]), rejected.message)
        result: ValidationResult = rejected.to_result("file_path")
        first = next(iter(self._by_root.values()), None)
        if first is not None:
            data = {"file_path": str(raw)}
            self._track(first.reject(self._source_module, Kind.FILE_UPDATE, result, data))

    async def close(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for root in [*self._followers, *self._by_root]:
            await self.remove(root)


def _reported_name(raw: str | Path) -> str:
    """The last name of a reported path or ``file:`` URI, as reported (no link resolved)."""
    text = str(raw)
    if text.startswith("file:"):
        text = unquote(text)
    return text.rstrip("/").rpartition("/")[2]


async def _reported(catching: asyncio.Task[None]) -> None:
    try:
        await catching
    except (OSError, sqlite3.Error) as error:  # the store or the tree: one line, no trace
        log.warning("the start-up catch-up failed: %s", error)
    except Exception:
        log.exception("the start-up catch-up failed")

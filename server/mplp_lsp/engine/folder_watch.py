"""One workspace folder watched by the file-system watcher (:mod:`mplp_lsp.sources.fswatch`).

``mplp-lsp watch`` records a folder this way, and so does ``serve`` for each folder it owns
when the editor does not watch the workspace itself (lsp/lifecycle.py decides): the same
engine, so renames and new directories are recorded in every editor as they are by ``watch``.
What the watcher reports is routed like any raw path (refusals are counted there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from mplp_lsp.sources.debounce import WATCHER, Change
from mplp_lsp.sources.fswatch import watch_files

if TYPE_CHECKING:
    from mplp_lsp.engine.workspace import Workspace

log = logging.getLogger(__name__)


class Router(Protocol):
    """Where a reported path goes (``engine.workspaces.Workspaces``, which holds the watches):
    routed to its folder like any raw path."""

    def observe(
        self, change: Change, raw: str, *, previous: str | None = None, origin: str = ...
    ) -> object: ...


class FolderSink:
    """Where the watcher's reports of one folder go."""

    def __init__(self, workspaces: Router, workspace: Workspace) -> None:
        self._workspaces = workspaces
        self._workspace = workspace
        self._cut = len(str(workspace.root)) + 1

    def changed(self, change: Change, path: str, previous: str | None = None) -> None:
        self._workspaces.observe(change, path, previous=previous, origin=WATCHER)

    def lost(self, directory: str) -> None:
        self._workspace.recheck_tree(directory[self._cut :])

    def saturated(self) -> bool:
        return self._workspace.files.saturated


async def watch_folder(
    workspaces: Router,
    workspace: Workspace,
    stop: asyncio.Event,
    ready: Callable[[], None] = lambda: None,
) -> None:
    """Watch ``workspace``'s folder until ``stop`` is set; ``ready`` once every directory
    is watched. The state dir and the directories the folder's rules ignore are not."""
    await watch_files(
        str(workspace.root),
        FolderSink(workspaces, workspace),
        stop,
        skip=(str(workspace.paths.root),),
        ignored_dir=lambda relative: workspace.ignore.is_ignored(f"{relative}/"),
        ready=ready,
    )


class FolderWatch:
    """:func:`watch_folder` in the background, for as long as the folder is recorded."""

    def __init__(self, workspaces: Router, workspace: Workspace, ready: Callable[[], None]) -> None:
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._run(workspaces, workspace, ready), name=f"watch {workspace.root.name}"
        )

    async def _run(
        self, workspaces: Router, workspace: Workspace, ready: Callable[[], None]
    ) -> None:
        started = False

        def watching() -> None:
            nonlocal started
            started = True
            ready()

        try:
            await watch_folder(workspaces, workspace, self._stop, watching)
        except Exception:
            log.exception("%s: the file watcher stopped", workspace.root)
            if not started:
                ready()  # what the watcher would have waited for runs without it

    async def close(self) -> None:
        self._stop.set()
        await asyncio.gather(self._task, return_exceptions=True)

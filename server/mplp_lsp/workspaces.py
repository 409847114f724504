"""All open workspaces of one daemon, and routing of raw paths and URIs to them.

Each workspace folder has its own store (one database per workspace). Input is routed to
the deepest folder that contains it, after the sanitiser has resolved symlinks; anything
else is refused with a stable code and counted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.sanitize.paths import DirectoryCache, PathRejected, relative_path
from mplp_lsp.sanitize.redact import redact
from mplp_lsp.settings import Settings
from mplp_lsp.sources.debounce import WATCHER, Change
from mplp_lsp.workspace import Prepare, Workspace

log = logging.getLogger(__name__)


class Workspaces:
    def __init__(
        self, *, state_dir: str | Path | None = None, remote_url: str | None = None
    ) -> None:
        self._by_root: dict[Path, Workspace] = {}
        self._state_dir = state_dir
        self._remote_url = remote_url
        self._background: set[asyncio.Task[None]] = set()
        self.refused = 0

    def __iter__(self) -> Iterator[Workspace]:
        return iter(list(self._by_root.values()))

    def __len__(self) -> int:
        return len(self._by_root)

    @property
    def roots(self) -> tuple[Path, ...]:
        return tuple(self._by_root)

    async def add(
        self,
        root: Path,
        settings: Settings,
        *,
        prepare: Prepare | None = None,
        catch_up: bool = True,
    ) -> Workspace:
        """Open a folder and, unless told not to, start its :meth:`catch_up`."""
        root = root.resolve()
        if root in self._by_root:
            return self._by_root[root]
        # An explicit --state-dir can serve one folder only: one store per workspace.
        state_dir = self._state_dir if not self._by_root else None
        workspace = await Workspace.open(
            root, settings, state_dir=state_dir, remote_url=self._remote_url, prepare=prepare
        )
        self._by_root[root] = workspace
        if catch_up:
            self.catch_up(workspace)
        return workspace

    def catch_up(self, workspace: Workspace) -> None:
        """Start the catch-up: files created while nothing recorded become ``created`` events
        (recorded files that changed are the start-up drift scan's). A file watcher of the
        daemon's own starts it once its watches are in place, so nothing falls between."""
        self._track(self._catch_up(workspace))

    async def _catch_up(self, workspace: Workspace) -> None:
        try:
            found = await workspace.unrecorded_files()
        except Exception:
            log.exception("the start-up catch-up scan failed")
            return
        if workspace.root in self._by_root:
            for path in found:
                self.observe(Change.CREATED, path, origin=WATCHER)

    def _track(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def remove(self, root: Path) -> None:
        workspace = self._by_root.pop(root.resolve(), None)
        if workspace is not None:
            await workspace.close()

    def locate(
        self, raw: str | Path, *, directories: DirectoryCache | None = None
    ) -> tuple[Workspace, str]:
        """The workspace that owns a path or ``file:`` URI, and the path relative to it."""
        root, relative = relative_path(str(raw), self.roots, directories=directories)
        return self._by_root[root], relative

    def observe(
        self,
        change: Change,
        raw: str | Path,
        *,
        previous: str | Path | None = None,
        origin: str = "editor",
        language: str | None = None,
        directories: DirectoryCache | None = None,
    ) -> bool:
        """Route one raw change; a refused path is counted and logged as an integration error.

        ``directories`` is shared by the changes of one synchronous batch (see
        :func:`relative_path`).
        """
        try:
            workspace, path = self.locate(raw, directories=directories)
            previous_path = None
            if previous is not None:
                previous_workspace, previous_path = self.locate(previous, directories=directories)
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

    def refuse(self, raw: str | Path, rejected: PathRejected) -> None:
        """Counted here, and logged in the first workspace's integration error log."""
        self.refused += 1
        log.warning("refused path %r: %s", redact(str(raw)[:200]), rejected.message)
        result: ValidationResult = rejected.to_result("file_path")
        first = next(iter(self._by_root.values()), None)
        if first is not None:
            self._track(first.reject("ide", Kind.FILE_UPDATE, result, {"file_path": str(raw)}))

    async def close(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for root in list(self._by_root):
            await self.remove(root)

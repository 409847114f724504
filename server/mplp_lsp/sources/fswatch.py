"""File-system watching for ``mplp-lsp watch``: the same engine as the editor, fed by watchfiles."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change as FsChange
from watchfiles import awatch

_CHANGES = {FsChange.added: "created", FsChange.modified: "modified", FsChange.deleted: "deleted"}


async def watch_files(
    root: Path,
    on_change: Callable[[str, str], object],
    stop: asyncio.Event,
    *,
    skip: tuple[Path, ...] = (),
) -> None:
    """Call ``on_change(change, absolute_path)`` for each change under ``root`` until ``stop``.

    watchfiles' own batching is kept short: the daemon's debouncer does the coalescing.
    ``.git`` and ``skip`` (the state dir) are dropped before they cost anything more.
    """
    prefixes = tuple(f"{path}/" for path in (root / ".git", *skip))

    def wanted(_change: FsChange, path: str) -> bool:
        return not path.startswith(prefixes)

    async for batch in awatch(root, watch_filter=wanted, debounce=50, step=20, stop_event=stop):
        for change, path in batch:
            on_change(_CHANGES[change], path)

"""A workspace whose store another mplp-lsp process owns: a second editor on the same folder.

One process writes a store (:mod:`mplp_lsp.engine.statedir`). A second editor's server does not sit
idle: it *follows*. It coalesces what its editor reports (saves, file operations; the disk
itself is watched by the owner) as an owner would, leaves out content it
has already handed over (:mod:`mplp_lsp.sources.recorded`), and hands each batch to the owner
through the state dir's inbox, the durable spool files ``mplp-lsp emit`` uses (the owner
drains them on a short poll and leaves out what its store already records). It looks at the
lock every :data:`TAKEOVER_POLL` seconds; :class:`~mplp_lsp.engine.workspaces.Workspaces` opens the
store as soon as the owner has let go, and this follower's last batch goes to the inbox that
the new owner drains when it starts. Nothing observed is lost on the way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine import handoff
from mplp_lsp.engine.file_activity import (
    admit,
    file_submissions,
    new_debouncer,
    observation,
    root_sent,
    screen_settled,
)
from mplp_lsp.engine.statedir import StateDirLock, StatePaths
from mplp_lsp.ignore.judge import InOrderJudge
from mplp_lsp.ignore.rules import IgnoreRules
from mplp_lsp.sources.debounce import WATCHER, Change, Settled
from mplp_lsp.sources.files import EditorDocuments
from mplp_lsp.sources.recorded import RecordedContent

TAKEOVER_POLL: Final = 0.5  # seconds between looks at the owner's lock


class Follower:
    role: Final = "follower"

    def __init__(
        self, root: Path, settings: Settings, paths: StatePaths, owner: dict[str, Any] | None
    ) -> None:
        self.root = root
        self.settings = settings
        self.paths = paths
        self.owner_pid = owner.get("pid") if owner else None
        self.ignore = IgnoreRules(root, excludes=settings.exclude, internal_dirs=[paths.root])
        self.judge = InOrderJudge(lambda: self.ignore, on_ignored=lambda: None)
        self.documents = EditorDocuments()
        self.recorded = RecordedContent(root)
        self.handed = 0
        self.debouncer = new_debouncer(self._hand, settings)
        self._listeners: list[Callable[[int], None]] = []

    def on_commit(self, listener: Callable[[int], None]) -> None:
        """Called with the number of events after each batch handed to the owner."""
        self._listeners.append(listener)

    def observe(
        self,
        change: Change,
        path: str,
        *,
        previous_path: str | None = None,
        origin: str = "editor",
        language: str | None = None,
    ) -> bool | None:
        admitted = admit(change, path, previous_path)
        if admitted is None or path == ".git" or path.startswith(".git/"):
            return False  # the owner's Git source sees the repository itself
        if origin == WATCHER:
            # The disk is the owner's to watch (its editor's watcher, or its own): it decides
            # a report from what its graph records, which a follower does not have.
            return False
        change, previous_path = admitted
        seen = observation(change, path, previous_path, origin, language)
        return self.judge.submit(path, lambda: self.debouncer.observe(seen))

    def observe_many(self, changes: Sequence[tuple[Change, str]], *, origin: str) -> None:
        for change, path in changes:
            self.observe(change, path, origin=origin)

    async def _hand(self, batch: list[Settled]) -> None:
        batch = await screen_settled(batch, self.recorded, self.documents)
        submissions = file_submissions(batch, self.documents, root_sent(self.root, self.settings))
        if submissions:
            await asyncio.to_thread(handoff.spool, self.paths, submissions)
            self.handed += len(submissions)
            for listener in self._listeners:
                listener(len(submissions))

    def owner_gone(self) -> bool:
        return StateDirLock(self.paths.lock).owner() is None

    async def close(self) -> None:
        """Hand over everything still pending (to whoever owns the store next)."""
        await self.judge.settled()
        await self.debouncer.flush()
        await self.debouncer.aclose()

    def status(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "role": self.role,
            "owner_pid": self.owner_pid,
            "handed": self.handed,
            "pending": self.debouncer.pending_count + self.judge.waiting,
            "state_dir": str(self.paths.root),
        }

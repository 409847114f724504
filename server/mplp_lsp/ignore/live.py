"""A workspace's ignore rules as they are now (Git's rules and the ``exclude`` setting).

The rules are replaced when ``exclude`` changes and re-read per directory when a
``.gitignore`` does; :attr:`LiveIgnore.epoch` changes each time, so a drift scan re-checks
its ignore verdicts only then. A scan thread gets a fresh rule set of its own
(:meth:`LiveIgnore.fresh`): the live one is used on the event loop only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mplp_lsp.config.live import Ignore
from mplp_lsp.ignore.rules import IgnoreRules


class LiveIgnore:
    def __init__(self, root: Path, excludes: Sequence[str], internal_dirs: Sequence[Path]) -> None:
        """``internal_dirs``: folders never reported (the daemon's state dir when it lies
        inside the workspace)."""
        self._root = root
        self._excludes = tuple(excludes)
        self._internal = tuple(internal_dirs)
        self._nested: tuple[Path, ...] = ()
        self.rules = self.fresh()
        self.epoch = 0

    def is_ignored(self, path: str) -> bool:
        return self.rules.is_ignored(path)

    def current(self) -> IgnoreRules:
        return self.rules

    def current_epoch(self) -> int:
        return self.epoch

    def fresh(self) -> IgnoreRules:
        """A new rule set, read from disk (for a thread)."""
        return IgnoreRules(
            self._root, excludes=self._excludes, internal_dirs=(*self._internal, *self._nested)
        )

    def nested_changed(self, roots: Sequence[Path]) -> None:
        """Workspace folders inside this one: each records its own files, this one none of
        them (a baseline or a rescan here never lists them)."""
        nested = tuple(sorted(roots))
        if nested != self._nested:
            self._nested = nested
            self.rules = self.fresh()
            self.epoch += 1

    def gitignore_changed(self, path: str) -> None:
        self.rules.invalidate(path)
        self.epoch += 1

    def excludes_changed(self, new: Ignore, _old: Ignore | None = None) -> None:
        """The Ignore section's subscriber: the ``exclude`` setting changed."""
        self._excludes = new.exclude
        self.rules = self.rules.with_excludes(new.exclude)
        self.epoch += 1

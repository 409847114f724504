"""Repository drift: the HEAD and branch the PSG recorded vs the repository's real ones.

The real state is read from ``.git`` directly (a few small files, no process). The recorded
state sits behind :class:`RepositoryRecord`: until the Git event tables exist it is a value
kept in the store's ``meta`` table (:class:`MetaRepositoryRecord`), set when first seen and
when the user resolves the drift; the Git tracker can later provide its own record.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mplp_lsp.sanitize.redact import redact_name
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs.gitfile import find_git_dir

_HEAD_KEY = "drift.repository.head"
_BRANCH_KEY = "drift.repository.branch"


@dataclass(frozen=True, slots=True)
class RepositoryState:
    head: str | None  # the commit id; None in a repository without commits
    branch: str | None  # None: a detached HEAD


class RepositoryRecord(Protocol):
    def recorded(self, conn: sqlite3.Connection) -> RepositoryState | None: ...

    def record(self, conn: sqlite3.Connection, state: RepositoryState) -> None: ...


class MetaRepositoryRecord:
    """The recorded state as two ``meta`` keys (until the Git tables provide it)."""

    def recorded(self, conn: sqlite3.Connection) -> RepositoryState | None:
        events = EventLog(conn)
        head, branch = events.get_meta(_HEAD_KEY), events.get_meta(_BRANCH_KEY)
        if head is None and branch is None:
            return None
        return RepositoryState(head or None, branch or None)

    def record(self, conn: sqlite3.Connection, state: RepositoryState) -> None:
        events = EventLog(conn)
        events.set_meta(_HEAD_KEY, state.head or "")
        events.set_meta(_BRANCH_KEY, state.branch or "")


def git_dir(root: Path) -> Path | None:
    """The git dir of the repository holding ``root`` (a ``.git`` dir or a gitfile's target)."""
    found = find_git_dir(root)
    return None if found is None else found[1]


def read_state(directory: Path) -> RepositoryState | None:
    """HEAD and branch from the files of a git dir; None if HEAD cannot be read. The branch
    is named as the store names refs (redacted, as the whole ref is: the PSG's branch nodes
    are keyed so): it is compared with the recorded one, stored, and shown in drift findings
    and status."""
    try:
        head = (directory / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not head.startswith("ref:"):
        return RepositoryState(head or None, None)
    ref = head.removeprefix("ref:").strip()
    branch = redact_name(ref).removeprefix("refs/heads/")
    return RepositoryState(_resolve_ref(directory, ref), branch)


def _common_dir(directory: Path) -> Path:
    try:
        named = Path((directory / "commondir").read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return directory
    return named if named.is_absolute() else directory / named


def _resolve_ref(directory: Path, ref: str) -> str | None:
    for base in (directory, _common_dir(directory)):
        try:
            value = (base / ref).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if value.startswith("ref:"):
            return _resolve_ref(directory, value.removeprefix("ref:").strip())
        return value or None
    try:
        packed = (_common_dir(directory) / "packed-refs").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in packed.splitlines():
        commit, _, name = line.partition(" ")
        if name == ref and not line.startswith(("#", "^")):
            return commit
    return None  # an unborn branch

"""Commit metadata for the PSG, read from the workspace's repository by commit id.

The graph meets some commits only as a reference: the commit a push, a tag or a new branch
names, the parent of a commit it records. For those it reads author, time and subject
from the repository (one ``git log --no-walk --stdin`` for a whole batch, as for the
events), treated as the intake treats a git_event: the name and subject redacted, the
address as ``gitAuthorEmail`` says. A commit the repository does not have (another
repository's, a shallow clone's boundary) is simply not found.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from mplp_lsp.config.settings import EmailPolicy
from mplp_lsp.sanitize.redact import redact
from mplp_lsp.vcs.operations import author_email, commit_infos
from mplp_lsp.vcs.repo import GitRepo, RepoRefused

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Commit:
    commit_id: str
    author_name: str | None
    author_email: str | None
    committed_at: int  # seconds since the epoch
    subject: str
    parents: tuple[str, ...]


class RepositoryCommits:
    """Reads commits of the repository holding ``root``; opened at the first read."""

    def __init__(self, root: Path, email_policy: Callable[[], EmailPolicy]) -> None:
        self._root = root
        self._policy = email_policy
        self._lock = threading.Lock()
        self._repo: GitRepo | None = None
        self._refused = False

    def read(self, commit_ids: Iterable[str]) -> dict[str, Commit]:
        """The commits the repository has among ``commit_ids`` (runs git: off the loop)."""
        wanted = list(commit_ids)
        with self._lock:
            repo = self._open()
            if repo is None or not wanted:
                return {}
            try:
                infos = commit_infos(repo, wanted)
            except Exception as error:  # git went away: the graph keeps what the event says
                log.warning("psg: commits cannot be read from %s: %s", self._root, error)
                return {}
        policy = self._policy()
        return {
            oid: Commit(
                oid,
                redact(info.author_name) or None,
                author_email(info.author_email, policy),
                info.committed_at,
                redact(info.subject),
                info.parents,
            )
            for oid, info in infos.items()
        }

    def _open(self) -> GitRepo | None:
        if self._repo is None and not self._refused:
            try:
                self._repo = GitRepo.open(self._root)
            except RepoRefused:
                self._refused = True
        return self._repo

    def close(self) -> None:
        with self._lock:
            if self._repo is not None:
                self._repo.close()
            self._repo = None

"""Who a forwarding stream is, as its reports tell the collector (docs/forwarding.md).

- ``origin``: a hash of the machine, the user and the store file's path. A store that is
  salvaged, or deleted and made again, starts a new stream from the same origin, so the
  collector marks the older stream as replaced instead of listing it as live forever.
- ``machine``: the host name (the team chooses whether its view shows names or hashes).
- ``author_name``, ``author_email``: the workspace's configured git author, the one its
  file activity is attributed to; the address as ``gitAuthorEmail`` sends it in commits
  (hashed by default), so it matches the author of the workstation's own commits.
- ``previous_stream``: the stream a salvage of this store ended, when there was one.
"""

from __future__ import annotations

import getpass
import hashlib
import socket
from dataclasses import dataclass
from pathlib import Path

from mplp_lsp.config.settings import EmailPolicy
from mplp_lsp.vcs.operations import author_email
from mplp_lsp.vcs.repo import GitRepo, RepoRefused

__all__ = ["StreamIdentity", "identify"]


@dataclass(frozen=True, slots=True)
class StreamIdentity:
    origin: str
    machine: str
    author_name: str | None = None
    author_email: str | None = None
    previous_stream: str | None = None


def identify(
    store: Path, root: Path | None, policy: EmailPolicy, previous_stream: str | None
) -> StreamIdentity:
    """Blocking (it may ask git): call it off the event loop."""
    machine = socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid
        user = ""
    place = "\0".join((machine, user, str(store.resolve())))
    origin = hashlib.blake2b(place.encode(errors="surrogatepass"), digest_size=16).hexdigest()
    name, email = _git_author(root) if root is not None else (None, None)
    return StreamIdentity(
        origin=origin,
        machine=machine,
        author_name=name,
        author_email=None if email is None else author_email(email, policy),
        previous_stream=previous_stream,
    )


def _git_author(root: Path) -> tuple[str | None, str | None]:
    """``user.name`` and ``user.email`` as git resolves them for the workspace."""
    try:
        repo = GitRepo.open(root)
    except RepoRefused:
        return None, None
    try:
        return _config(repo, "user.name"), _config(repo, "user.email")
    finally:
        repo.close()


def _config(repo: GitRepo, key: str) -> str | None:
    import git

    try:
        value = repo.run("config", "--get", key).strip()
    except git.GitCommandError:  # not set: git exits 1
        return None
    return value or None

"""Content hashes of file nodes, and the one way to compare a file with a recorded hash.

A node's ``content_hash`` names its scheme before the colon:

* ``blake2b-128:<hex>``: what the daemon computes when it reads a file (an event applied, a
  drift resolved, an untracked file of the baseline);
* ``git-blob-sha1:<hex>`` / ``git-blob-sha256:<hex>``: the Git object id of the file's
  content, taken from the index for the baseline of a repository's tracked files (Git has
  hashed them already; reading 100,000 files again to learn what Git knows would cost
  seconds at the first start).

Whoever compares a file with a recorded hash computes the file's hash in the recorded
scheme (:func:`digest_fd`, :func:`digest_bytes` with ``like=``), so both schemes compare
content exactly. A Git blob id also names the recorded content in the object database
(:func:`blob_oid`), which is where "PSG wins" finds it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Final, Protocol

BLAKE2B: Final = "blake2b-128:"
GIT_SHA1: Final = "git-blob-sha1:"
GIT_SHA256: Final = "git-blob-sha256:"
_CHUNK: Final = 2**20
_SHA1_HEX: Final = 40
_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def git_blob(oid: str) -> str:
    """The content hash for a Git blob id (SHA-1 or SHA-256 by its length)."""
    return (GIT_SHA1 if len(oid) == _SHA1_HEX else GIT_SHA256) + oid


def blob_oid(content_hash: str | None) -> str | None:
    """The Git object id a content hash names, or None for the daemon's own scheme."""
    if content_hash is None:
        return None
    for prefix in (GIT_SHA1, GIT_SHA256):
        if content_hash.startswith(prefix):
            return content_hash[len(prefix) :]
    return None


def _start(size: int, like: str | None) -> tuple[str, _Digest]:
    if like is not None and like.startswith(GIT_SHA1):
        digest: _Digest = hashlib.sha1(usedforsecurity=False)
        prefix = GIT_SHA1
    elif like is not None and like.startswith(GIT_SHA256):
        digest, prefix = hashlib.sha256(), GIT_SHA256
    else:
        return BLAKE2B, hashlib.blake2b(digest_size=16)
    digest.update(b"blob %d\0" % size)  # Git hashes a header, then the content
    return prefix, digest


def digest_bytes(data: bytes, like: str | None = None) -> str:
    """The hash of ``data`` in the scheme of ``like`` (default: the daemon's own)."""
    prefix, digest = _start(len(data), like)
    digest.update(data)
    return prefix + digest.hexdigest()


def digest_fd(fd: int, size: int, like: str | None = None) -> str:
    """The hash of an open file read to its end; ``size`` from its ``fstat`` (Git's
    header needs it first; a file that grows meanwhile hashes to something no recorded
    content has, which is the truth: it is not that content)."""
    prefix, digest = _start(size, like)
    while chunk := os.read(fd, _CHUNK):
        digest.update(chunk)
    return prefix + digest.hexdigest()


def safe_hash(path: str, *, like: str | None = None) -> str | None:
    """The content hash of a regular file in the scheme of ``like``, or None if it cannot
    be read.

    Opened non-blocking and without following a symlink, then checked with fstat: a path
    swapped for a fifo or a device after any earlier look can never block the caller.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return digest_fd(fd, info.st_size, like)
    except OSError:
        return None
    finally:
        os.close(fd)

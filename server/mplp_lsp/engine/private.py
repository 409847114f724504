"""Folders and files that only this user can change: the state dir and what is secret in it.

The state dir holds the API token, the file that says where the API listens, the event store
and the dashboard's login page. Whoever can write that folder, or any folder above it, can
swap one of them: point a client at their own listener, or at a file of the user's to send
as a token. So, as ssh does with ``~/.ssh``, :func:`check_private_dir` refuses a folder
unless it and every folder above it, up to the user's home or a sticky folder such as
``/tmp``, belong to the user (root may own those above it) and no group or other user may
write them. The refusal names the folder and the command that fixes it.

Files written here (:func:`write_private`) are created 0600 whatever the umask, never
through a link, and replace the old one atomically; :func:`read_private` reads a file only
if it is a regular file of this user that nobody else can read or write.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

__all__ = ["NotPrivate", "check_private_dir", "make_private_dir", "read_private", "write_private"]

_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_OTHERS_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH


class NotPrivate(PermissionError):
    """A folder or file that another user could change (or read); the message says how to fix it."""


def _owner(uid: int) -> str:
    import pwd  # POSIX only, like the checks that name an owner

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def check_private_dir(folder: Path, *, what: str = "the state dir") -> None:
    """Raise :class:`NotPrivate` unless ``folder`` and the folders above it are the user's.

    The walk follows the real path (links resolved) from ``folder`` up, and stops at the
    user's home or at a sticky folder (``/tmp``: others may create entries there, but not
    rename or remove ours). Not on systems without POSIX owners (Windows).
    """
    if not hasattr(os, "geteuid"):
        return
    uid = os.geteuid()
    real = Path(os.path.realpath(folder))
    home = Path(os.path.realpath(Path.home()))
    current = real
    while True:
        info = os.lstat(current)
        mine = info.st_uid == uid
        if current == real and not mine:
            raise NotPrivate(
                f"{what} {folder} belongs to {_owner(info.st_uid)}, not to you: that user could "
                "replace the API token, the endpoint file or the store in it. Use a state dir of "
                "your own (--state-dir or MPLP_LSP_STATE_DIR naming a folder you own, or neither "
                "for the default)"
            )
        if not (mine or info.st_uid == 0):
            raise NotPrivate(
                f"{what} {folder} is inside {current}, which belongs to {_owner(info.st_uid)}: "
                "that user could replace the state dir. Use a state dir in a folder of your own"
            )
        sticky = bool(info.st_mode & stat.S_ISVTX) and current != real
        if info.st_mode & _OTHERS_WRITE and not sticky:
            mode = stat.S_IMODE(info.st_mode)
            raise NotPrivate(
                f"{what} {folder} is not private: {current} is writable by "
                f"{'others' if info.st_mode & stat.S_IWOTH else 'its group'} (mode {mode:04o}). "
                f"Fix it with: chmod go-w {current}"
            )
        if sticky or current == home or current.parent == current:
            return
        current = current.parent


def make_private_dir(folder: Path, *, what: str = "the state dir") -> None:
    """Create ``folder`` and its missing parents 0700, then :func:`check_private_dir` it.

    Folders that already exist keep their mode (the check refuses those others may write).
    """
    missing: list[Path] = []
    probe = folder
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # created concurrently by someone else: the check judges it
        # mkdir's mode is filtered through the umask; set it exactly.
        directory.chmod(0o700)
    check_private_dir(folder, what=what)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by this user only, replacing any older file atomically."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC
    fd = os.open(temporary, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask cannot widen it, an old file's mode does not matter
        os.write(fd, data)
    finally:
        os.close(fd)
    temporary.replace(path)


def read_private(path: Path, limit: int = 4096) -> bytes:
    """The first ``limit`` bytes of a file that is this user's own and private to them.

    Raises :class:`NotPrivate` for a file of another user, or one others may read or
    write; ``OSError`` if it cannot be opened (a link is not followed).
    """
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    try:
        info = os.fstat(fd)
        if hasattr(os, "geteuid") and (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.geteuid()
            or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
        ):
            raise NotPrivate(
                f"{path} is not a private file of yours (owner {_owner(info.st_uid)}, mode "
                f"{stat.S_IMODE(info.st_mode):04o}); it is not used"
            )
        return os.read(fd, limit)
    finally:
        os.close(fd)

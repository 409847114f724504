"""File operations that cannot leave the workspace, whatever links it holds.

Every write the daemon makes in a workspace (drift restore and merge, AEL file actions)
goes through here. A path is walked one component at a time from a descriptor of the
workspace root, each directory opened with ``O_NOFOLLOW`` relative to its parent's
descriptor and each missing one created the same way, so a symbolic link anywhere in the
path (``keys/`` replaced by a link to a folder outside) is refused before anything is
created, and a link swapped in between two steps cannot redirect the next one. The final
name is opened, created, replaced, renamed or removed relative to its parent's descriptor,
never by a path the kernel would resolve again. Links are refused even when they point
back inside: the daemon never needs to write through one.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath

from mplp_lsp.protocol.result import ErrorCode

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathEscape(OSError):
    """A path the daemon may not write through: a link (or a non-directory) on the way."""

    code = ErrorCode.PATH_SYMLINK_ESCAPE

    def __init__(self, relpath: str, component: str) -> None:
        self.message = (
            f"{component!r} in {relpath!r} is a link or not a directory; "
            "nothing is written through it"
        )
        super().__init__(errno.ELOOP, self.message)
        self.relpath = relpath


def _parts(relpath: str) -> tuple[str, ...]:
    parts = PurePosixPath(relpath).parts
    if not parts or any(p in ("", ".", "..") for p in parts) or parts[0] == "/":
        raise ValueError(f"not a plain relative path: {relpath!r}")
    return parts


def _open_dir(parent: int, name: str, relpath: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathEscape(relpath, name) from None
        raise


@contextmanager
def parent_dir(root: Path, relpath: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """A descriptor of ``relpath``'s parent directory, reached without following links
    (created when ``create``), and the final name."""
    *directories, name = _parts(relpath)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the root is trusted
    try:
        for directory in directories:
            if create:
                with suppress(FileExistsError):
                    os.mkdir(directory, 0o777, dir_fd=fd)
            child = _open_dir(fd, directory, relpath)
            os.close(fd)
            fd = child
        yield fd, name
    finally:
        os.close(fd)


def _mode_of(parent: int, name: str, relpath: str) -> int | None:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise PathEscape(relpath, name)
    return stat.S_IMODE(info.st_mode)


def read_bytes(root: Path, relpath: str) -> bytes | None:
    """The file's bytes, or None when it (or a directory on the way) does not exist; links
    are refused."""
    try:
        with parent_dir(root, relpath) as (parent, name):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise PathEscape(relpath, name) from None
                raise
            with os.fdopen(fd, "rb") as handle:
                return handle.read()
    except FileNotFoundError:
        return None


def write_bytes(
    root: Path, relpath: str, data: bytes, *, prefix: str, default_mode: int = 0o644
) -> None:
    """Replace (or create) the file atomically, keeping its mode; missing directories are
    created. The temporary file is ``<prefix><random>`` beside the target."""
    with parent_dir(root, relpath, create=True) as (parent, name):
        mode = _mode_of(parent, name, relpath)
        scratch = f"{prefix}{secrets.token_hex(6)}"
        fd = os.open(scratch, _NEW_FILE, 0o600, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                os.fchmod(out.fileno(), default_mode if mode is None else mode)
            os.replace(scratch, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(scratch, dir_fd=parent)
            raise


def unlink(root: Path, relpath: str) -> None:
    with parent_dir(root, relpath) as (parent, name):
        os.unlink(name, dir_fd=parent)


def exists(root: Path, relpath: str) -> bool:
    """Whether anything (a link included) is at ``relpath``; links on the way are refused."""
    try:
        with parent_dir(root, relpath) as (parent, name):
            os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def rename(root: Path, source: str, target: str) -> None:
    """Move ``source`` to ``target`` (its directories created), both inside the workspace."""
    with (
        parent_dir(root, source) as (old_parent, old_name),
        parent_dir(root, target, create=True) as (new_parent, new_name),
    ):
        os.rename(old_name, new_name, src_dir_fd=old_parent, dst_dir_fd=new_parent)

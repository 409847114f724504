"""When a file was created (its birth time), where the system tells.

A file's ``ctime`` says when its inode last changed, which a write also does; only the birth
time says whether the file existed at a given moment. ``os.stat`` carries it on macOS,
FreeBSD and Windows (``st_birthtime_ns``); on Linux it comes from ``statx(2)`` (Linux 4.11,
glibc 2.28), called through ``ctypes`` until ``os.statx`` exists, and only where the file
system records it (ext4, xfs, btrfs, tmpfs do). Anywhere else the answer is None.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from collections.abc import Callable
from functools import cache

_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_STATX_BTIME = 0x800
_STATX_SIZE = 256  # struct statx, with its spare fields
_MASK = struct.Struct("=I")
_TIMESTAMP = struct.Struct("=qI")  # tv_sec, tv_nsec
_BTIME_OFFSET = 80  # stx_mask, stx_blksize, ..., stx_attributes_mask, stx_atime: 80 bytes


def birth_ns(path: str) -> int | None:
    """The file's birth time in ns since the epoch (not following a symlink), or None."""
    statx = _statx()
    if statx is not None:
        return statx(path)
    try:
        born = getattr(os.lstat(path), "st_birthtime_ns", None)
    except OSError:
        return None
    return born if isinstance(born, int) else None


@cache
def _statx() -> Callable[[str], int | None] | None:
    """Linux's statx through the C library, or None (another system, an older library)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        call = libc.statx
    except (OSError, AttributeError, TypeError):
        return None  # an older C library: no birth times
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    call.restype = ctypes.c_int

    def born(path: str) -> int | None:
        buffer = ctypes.create_string_buffer(_STATX_SIZE)
        flags = _AT_SYMLINK_NOFOLLOW
        if call(_AT_FDCWD, os.fsencode(path), flags, _STATX_BTIME, buffer) != 0:
            return None
        (mask,) = _MASK.unpack_from(buffer.raw, 0)
        if not mask & _STATX_BTIME:
            return None  # the file system does not record it
        seconds, nanoseconds = _TIMESTAMP.unpack_from(buffer.raw, _BTIME_OFFSET)
        return int(seconds) * 1_000_000_000 + int(nanoseconds)

    return born

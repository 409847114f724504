"""When this process started, as a wall-clock time in ns since the epoch.

A workspace's first baseline is cut here, not when its folder opens: the interpreter's start,
the imports and the editor's ``initialize`` take a second or more, and a file saved meanwhile
(by this editor or any other program) must be recorded as a change, not learnt as if it had
been there before (:mod:`mplp_lsp.engine.file_catch_up`).

On Linux the kernel says when the process was created (``/proc/self/stat``, in clock ticks
since boot, the clock ``CLOCK_BOOTTIME`` reads); elsewhere, the moment this module was first
imported, which the command line does before anything slow.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_IMPORTED_NS = time.time_ns()


def _from_kernel() -> int | None:
    """The process's creation time from ``/proc``, or None where there is none."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is None:
        return None
    try:
        fields = Path("/proc/self/stat").read_bytes().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime; fields 1 and 2 precede the ")"
        per_second = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    # The end of the tick it started in: a file written before the start (its ctime, from
    # the kernel's coarse clock, is never later than the write) is never taken for a change.
    age_ns = time.clock_gettime_ns(boottime) - (ticks + 1) * 1_000_000_000 // per_second
    return time.time_ns() - max(0, age_ns)


STARTED_NS: int = min(_from_kernel() or _IMPORTED_NS, _IMPORTED_NS)

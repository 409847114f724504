"""The cyclic garbage collector of a process that records: what it loaded to start is kept
out of the full collections.

A full collection walks every tracked object. In a server that has opened its folders that
is the modules, schemas and settings loaded at start, which never become garbage: a full
collection took 45 ms there, and the save it fell into waited for it (the daemon's save
latency is a few milliseconds). Frozen once the folders are open, they are left out, and a
full collection took 1.2-1.4 ms (``bench/bench_lsp.py --only latency``, the collector's
callbacks timed).
"""

from __future__ import annotations

import gc

__all__ = ["keep_started_objects"]


def keep_started_objects() -> None:
    """Move every object tracked now into the collector's permanent generation (once the
    process has started: later calls add what was loaded since)."""
    gc.freeze()

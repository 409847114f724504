"""How soon a thread waiting for the interpreter gets it: the switch interval of a process
that records.

The threads that answer (the graph's reader, the writer between two commits) hold the GIL
only briefly, but every call into SQLite gives it up and takes it back, and taking it back
waits for the thread holding it to reach the switch interval (5 ms by default). During a
burst the event loop's thread computes for long stretches: a status read of 13 small queries
on a thread waited 5-33 ms before each, 0.2-0.5 s in all. At 1 ms the same reads took at
most 65-130 ms, and the burst's CPU did not grow (in-process 20,000-path bursts, four runs
each way). The editor's status is now read on the event loop's thread itself
(``PsgService.read_now``).
"""

from __future__ import annotations

import sys
from typing import Final

__all__ = ["RECORDING_SWITCH_INTERVAL", "switch_quickly"]

RECORDING_SWITCH_INTERVAL: Final = 0.001  # seconds


def switch_quickly() -> None:
    """Let a waiting thread in after at most :data:`RECORDING_SWITCH_INTERVAL`."""
    sys.setswitchinterval(RECORDING_SWITCH_INTERVAL)

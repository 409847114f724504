"""The daemons' exit is bounded (exit_bound.exit_within): a hung shutdown still ends."""

from __future__ import annotations

import subprocess
import sys
import time

HUNG_SHUTDOWN = """
import threading, time
from mplp_lsp.process.exit_bound import exit_within
exit_within(0.5)
# What was seen after ':qa': asyncio's shutdown waiting forever on a non-daemon thread.
threading.Thread(target=time.sleep, args=(3600,)).start()
"""


def test_a_hung_shutdown_ends_within_the_grace() -> None:
    begin = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", HUNG_SHUTDOWN], capture_output=True, text=True, timeout=30
    )
    assert time.monotonic() - begin < 30
    assert done.returncode == 0
    assert "shutdown took over" in done.stderr

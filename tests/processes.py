"""Ending the real processes tests start (collectors, PgBouncer)."""

from __future__ import annotations

import subprocess
from typing import Any


def stop(process: subprocess.Popen[Any], timeout: float = 30) -> None:
    """Ask ``process`` to end (SIGTERM, so it can close cleanly); kill it past ``timeout``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

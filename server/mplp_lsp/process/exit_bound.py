"""How a daemon process ends: what it was told is stored, and the end is bounded.

``serve`` and ``watch`` end on the editor's ``exit``, at the end of their input, when the
editor's process is gone, and on SIGTERM, SIGHUP or SIGINT. Each way commits what the
editors and the watcher have already reported (their quiet periods are cut short) and
closes the store; :func:`exit_within` bounds that: the process ends
:data:`EXIT_GRACE_SECONDS` after the first of them even if the disk or asyncio's own
shutdown hangs (seen in 2 of ~50 quick ``:write | qa`` runs). A second signal changes
nothing: what is being stored is not cut off half-way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

EXIT_GRACE_SECONDS = 8.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_exit_armed = threading.Event()


def exit_within(seconds: float = EXIT_GRACE_SECONDS) -> None:
    """End the process after ``seconds`` unless it has ended by itself (armed once)."""
    if _exit_armed.is_set():
        return
    _exit_armed.set()

    def force() -> None:
        time.sleep(seconds)
        log.error("shutdown took over %.0f s; exiting now", seconds)
        logging.shutdown()
        os._exit(0)

    threading.Thread(target=force, name="mplp-exit-watchdog", daemon=True).start()


def stop_on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    """On the first of SIGTERM, SIGHUP or SIGINT: arm the bound and ``stop()`` (which stores
    what is pending on its way out); later ones are logged and change nothing."""
    stopping = threading.Event()

    def received(signum: int) -> None:
        name = signal.Signals(signum).name
        if stopping.is_set():
            log.info("%s: already storing what is pending and stopping", name)
            return
        stopping.set()
        log.info("%s: storing what is pending, then stopping", name)
        exit_within()
        stop()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, received, signum)

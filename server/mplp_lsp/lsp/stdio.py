"""A faster stdio transport for pygls, and the watch on the editor process.

pygls 2.1.1 reads stdin with one thread-pool hop per header line and per body, which caps
it near 1,000 messages/s here (notes/perf-baselines.md §5); an asyncio ``StreamReader``
on the same pipe does about 8× that. The message loop itself is pygls' own ``run_async``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from pygls.io_ import StdoutWriter, run_async

from mplp_lsp.exit_bound import exit_within

log = logging.getLogger(__name__)

_READ_LIMIT = 2**26  # the largest single header line we accept; bodies are read exactly
PARENT_POLL_SECONDS = 3.0


async def serve_stdio(
    server: Any,
    on_stop: Callable[[], Awaitable[None]],
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Run the message loop until stdin closes, ``exit`` arrives or the editor dies."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_LIMIT)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), stdin or sys.stdin.buffer
    )
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    messages = loop.create_task(
        run_async(
            # The loop ends at end of input or when this task is cancelled (the server's
            # stop_reading); nothing sets the event.
            stop_event=threading.Event(),
            reader=_EofTolerantReader(reader),
            protocol=server.protocol,
            error_handler=server.report_server_error,
        ),
        name="lsp-messages",
    )
    try:
        await messages
    finally:
        exit_within()
        await on_stop()


class _EofTolerantReader:
    """pygls expects ``b""`` at end of input; StreamReader raises instead."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def readline(self) -> bytes:
        try:
            return await self._reader.readline()
        except (asyncio.IncompleteReadError, ValueError, ConnectionError):
            return b""

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self._reader.readexactly(n)
        except (asyncio.IncompleteReadError, ConnectionError):
            return b""


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


async def watch_parent(pid: int, on_gone: Callable[[], None]) -> None:
    """The editor may die without closing our stdin (e.g. a shared pipe); check its pid."""
    while process_alive(pid):  # noqa: ASYNC110 (another process: nothing to await but time)
        await asyncio.sleep(PARENT_POLL_SECONDS)
    log.warning("editor process %d is gone; stopping", pid)
    on_gone()

"""A faster stdio transport for pygls, and the watch on the editor process.

pygls 2.1.1 reads stdin with one thread-pool hop per header line and per body, which caps
it near 1,000 messages/s here (notes/perf-baselines.md §5); an asyncio ``StreamReader``
on the same pipe does about 8× that. The message loop is this module's: pygls's
``run_async`` parses a body with the protocol as ``object_hook``, so the protocol is called
for every object inside a message, 20,000 times for a burst of watched-file changes (about
100 ms of the event loop before any request behind it is read); here the body is parsed as
plain JSON and only the message itself is structured.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter

from mplp_lsp.process.exit_bound import exit_within

if TYPE_CHECKING:
    from mplp_lsp.lsp.handshake import EarlyStart

log = logging.getLogger(__name__)

_READ_LIMIT = 2**26  # the largest single header line we accept; bodies are read exactly
PARENT_POLL_SECONDS = 3.0
_LARGE_BODY = 64 * 1024  # bytes
_LONG_DIGITS = re.compile(rb"[0-9]{19}")  # maybe an integer orjson cannot hold


async def serve_stdio(
    server: Any,
    on_stop: Callable[[], Awaitable[None]],
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    early: EarlyStart | None = None,
) -> None:
    """Run the message loop until stdin closes, ``exit`` arrives or the editor dies.

    ``early``: the input read (and maybe answered) before the server was loaded
    (:mod:`mplp_lsp.lsp.handshake`); the loop reads it first."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_LIMIT)
    if early is not None:
        reader.feed_data(early.prefix)
        early.stop = server.stop_reading
        server.protocol.early = early
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), stdin or sys.stdin.buffer
    )
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    server.protocol.end_session = server.stop_reading
    messages = loop.create_task(
        # Ends at the end of input or when this task is cancelled (the server's stop_reading).
        _read_messages(_EofTolerantReader(reader), server.protocol, server.report_server_error),
        name="lsp-messages",
    )
    try:
        await messages
    finally:
        exit_within()
        await on_stop()


_CONTENT_LENGTH = re.compile(rb"Content-Length: (\d+)\r\n")


async def _read_messages(
    reader: _EofTolerantReader,
    protocol: Any,
    on_error: Callable[[Exception, type[JsonRpcException]], None],
) -> None:
    """Hand each message to ``protocol`` until the end of input: header lines (the
    ``Content-Length`` one counts), an empty line, then that many bytes of JSON."""
    length = 0
    while header := await reader.readline():
        if not length:
            if found := _CONTENT_LENGTH.fullmatch(header):
                length = int(found.group(1))
            continue
        if header.strip():
            continue  # another header (Content-Type)
        body = await reader.readexactly(length)
        length = 0
        if not body:
            return
        try:
            message = parse_body(body)
        except (ValueError, RecursionError) as error:  # the client's: one line, no traceback
            log.warning("refused a message that is not JSON: %s", error)
            continue
        try:
            if isinstance(message, dict):
                message = protocol.structure_message(message)
            protocol.handle_message(message)
        except Exception as error:
            log.exception("could not handle a message")
            on_error(error, JsonRpcException)


def parse_body(body: bytes) -> Any:
    """A message's JSON. A large body (a watcher's burst: 20,000 changes are about 1.5 MB)
    is parsed by orjson, 1.3-1.5x faster here; whatever orjson refuses (NaN, lone
    surrogates, UTF-16) or reads otherwise (an integer beyond 64 bits becomes a float
    there) is parsed by json, so the outcome is json's. Parsing in a thread would not
    free the event loop: both parsers hold the GIL throughout."""
    if len(body) >= _LARGE_BODY and not _LONG_DIGITS.search(body):
        import orjson  # not before initialize: the start needs no event stored

        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


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

"""A client that leaves a streamed answer at once leaves no traceback in the server's log."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from urllib.parse import urlsplit

import pytest

from tests.support.http_api import Api
from tests.support.http_api import api as api  # the fixture

pytestmark = pytest.mark.unit


async def _ask_and_leave(api: Api, path: str) -> None:
    """Send the request, then drop the connection (a reset, as a closed tab does): the
    answer's first write, its headers, may find it gone already."""
    address = urlsplit(api.server.url)
    _, writer = await asyncio.open_connection(address.hostname, address.port)
    head = (
        f"GET {path} HTTP/1.1\r\nHost: {address.netloc}\r\n"
        f"Authorization: {api.headers['Authorization']}\r\n\r\n"
    )
    writer.write(head.encode())
    await writer.drain()
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


@pytest.mark.parametrize("path", ["/ui/api/live", "/ui/api/export?format=jsonl"])
async def test_a_client_that_leaves_a_stream_leaves_no_traceback(
    api: Api, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    for _ in range(30):
        await _ask_and_leave(api, path)
    await asyncio.sleep(0.5)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []  # was "Error handling request" with ClientConnectionResetError

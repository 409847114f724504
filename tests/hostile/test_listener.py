"""The loopback API under hostile local clients: browsers, stalled sockets, bad tokens."""

from __future__ import annotations

import asyncio
import time

import pytest

from mplp_lsp.api.app import openapi_document
from mplp_lsp.api.credentials import IDLE_TIMEOUT
from mplp_lsp.api.dashboard_shell import OPEN_ROUTES
from tests.support.http_api import Api
from tests.support.http_api import api as api

# Every route but the login page and its form (which hand out nothing: tested below).
ROUTES = [
    (method.upper(), path.replace("{kind}", "file").replace("{", "").replace("}", ""))
    for path, methods in openapi_document()["paths"].items()
    for method in methods
    if (method.upper(), path) not in OPEN_ROUTES
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_every_route_refuses_a_missing_or_wrong_token(
    api: Api, method: str, path: str
) -> None:
    for headers in ({}, {"Authorization": "Bearer " + "x" * 43}, {"Authorization": "Basic eDp5"}):
        async with api.session.request(method, api.server.url + path, headers=headers) as reply:
            assert reply.status == 401
            assert (await reply.json())["errors"][0]["code"] == "unauthorized"


async def test_the_login_form_opens_nothing_without_a_code_and_the_pages_nonce(api: Api) -> None:
    for headers in ({}, {"Sec-Fetch-Site": "same-origin"}, {"Authorization": "Bearer " + "x" * 43}):
        async with api.session.post(
            api.server.url + "/ui/login", json={"code": "guess"}, headers=headers
        ) as reply:
            assert reply.status in (401, 403)
            assert (
                "Set-Cookie" not in reply.headers or "mplp_ui_" not in reply.headers["Set-Cookie"]
            )


async def test_a_cross_origin_browser_request_is_refused(api: Api) -> None:
    # A "simple" cross-site form POST (no preflight): refused for its Origin, no CORS grant.
    async with api.session.post(
        api.server.url + "/integration/file",
        data=b'{"file_path": "x"}',
        headers={"Origin": "https://evil.example", "Content-Type": "text/plain"},
    ) as reply:
        assert reply.status == 403
        assert (await reply.json())["errors"][0]["code"] == "forbidden_origin"
        assert "Access-Control-Allow-Origin" not in reply.headers
    # The preflight a browser sends before adding an Authorization header is not granted.
    async with api.session.options(
        api.server.url + "/integration/file",
        headers={
            "Origin": "https://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    ) as reply:
        assert reply.status >= 400
        assert "Access-Control-Allow-Origin" not in reply.headers
    # Even holding the token, a request a browser made for a foreign page is refused.
    status, body = await api.call(
        "POST",
        "/integration/file",
        {"file_path": "src/a.py", "change_type": "modified", "timestamp": "2026-01-01T00:00:00Z"},
        headers={"Origin": "https://evil.example"},
    )
    assert (status, body["errors"][0]["code"]) == (403, "forbidden_origin")
    assert await api.events("file_update") == []


async def _idle_socket_lifetime(port: int, first: bytes, drip: bytes = b"") -> float:
    """Seconds until the server closes a connection that never completes its request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(first)
    await writer.drain()

    async def trickle() -> None:
        for byte in drip:
            await asyncio.sleep(1)
            writer.write(bytes([byte]))
            await writer.drain()

    dripping = asyncio.create_task(trickle())
    try:
        await asyncio.wait_for(reader.read(), IDLE_TIMEOUT + 20)
    finally:
        dripping.cancel()
        writer.close()
    return time.monotonic() - started


async def test_slow_loris_headers_are_cut_off(api: Api) -> None:
    port = api.server.port
    assert port is not None
    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    # Headers that never end, one byte a second: the connection is closed, not kept forever.
    lifetimes = await asyncio.gather(
        _idle_socket_lifetime(port, head, b"X-Slow: " + b"a" * 60),
        _idle_socket_lifetime(port, b""),
    )
    assert all(seconds < IDLE_TIMEOUT + 5 for seconds in lifetimes), lifetimes


async def test_slow_loris_body_is_bounded(api: Api) -> None:
    port = api.server.port
    assert port is not None
    head = (
        "POST /integration/file HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Content-Length: 1000\r\n"
    )
    # Without the token: refused at once, before a byte of the body is read.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write((head + "\r\n{").encode())
    await writer.drain()
    assert b" 401 " in await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    # With the token: a body that never arrives ends in a timeout answer, not a stuck handler.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write((head + f"Authorization: Bearer {api.server.token}\r\n\r\n{{").encode())
    await writer.drain()
    started = time.monotonic()
    status_line = await asyncio.wait_for(reader.readline(), IDLE_TIMEOUT + 20)
    assert b" 408 " in status_line
    assert time.monotonic() - started < IDLE_TIMEOUT + 5
    writer.close()


def test_the_token_file_is_private_and_not_in_the_endpoint(api: Api) -> None:
    token_file = api.server.token_file
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert api.server.token not in api.server.endpoint_file.read_text()

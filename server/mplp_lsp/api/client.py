"""Asking a running daemon's loopback API, for the CLI (aiohttp stays in the API package)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Final

__all__ = ["ApiUnanswered", "get_json", "post_for_lines"]

_CHUNK: Final = 64 * 1024


class ApiUnanswered(Exception):
    """The daemon did not answer in time, refused the request or is not listening."""


def get_json(url: str, path: str, token: str, timeout: float) -> Any:
    """``GET url+path`` with the bearer token; the decoded JSON body."""
    import aiohttp

    try:
        return asyncio.run(_get(url + path, token, timeout))
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        raise ApiUnanswered(str(error)) from error


async def _get(url: str, token: str, seconds: float) -> Any:
    import aiohttp

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds), headers=headers) as s,
        s.get(url) as response,
    ):
        response.raise_for_status()
        return await response.json()


def post_for_lines(
    url: str,
    path: str,
    token: str,
    body: Any,
    connect_timeout: float,
    on_line: Callable[[Any], None],
) -> tuple[int, Any]:
    """``POST url+path`` with a JSON body; a 200 answer is JSON Lines, each decoded line handed
    to ``on_line`` as it arrives (no time limit: the answer lasts as long as the work). Returns
    the status, and the decoded body of any other answer (``None`` for a 200)."""
    import aiohttp

    try:
        return asyncio.run(_post(url + path, token, body, connect_timeout, on_line))
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        raise ApiUnanswered(str(error)) from error


async def _post(
    url: str, token: str, body: Any, connect: float, on_line: Callable[[Any], None]
) -> tuple[int, Any]:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(timeout=timeout, headers=headers) as session,
        session.post(url, json=body) as response,
    ):
        if response.status != 200:
            return response.status, await response.json(content_type=None)
        pending = b""
        async for chunk in response.content.iter_chunked(_CHUNK):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                on_line(json.loads(line))
        return 200, None

"""Asking a running daemon's loopback API, for the CLI (aiohttp stays in the API package)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["ApiUnanswered", "get_json"]


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

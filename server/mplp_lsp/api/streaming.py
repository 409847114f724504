"""Answers streamed to a client that may leave at any moment."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from aiohttp import web


async def streamed(
    request: web.Request,
    response: web.StreamResponse,
    body: Callable[[web.StreamResponse], Awaitable[None]],
) -> web.StreamResponse:
    """Send ``response``'s headers, then what ``body`` writes.

    A client that goes away (a page closed, a download cancelled, a run's caller gone) ends
    the stream at whichever write finds the connection closed, the headers' own included: the
    handler has nobody left to answer, so it returns quietly instead of logging a traceback.
    """
    with contextlib.suppress(ConnectionError):
        await response.prepare(request)
        await body(response)
    return response

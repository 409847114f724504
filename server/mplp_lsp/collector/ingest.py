"""What a collector lets in: bounded bodies, a bounded number at a time, one writer per stream.

Memory: a gzip body of 64 KiB can inflate to 64 MiB, and every request reads its body
before it is handled. So a body is read by :func:`read_body` in the small pieces aiohttp
inflates it in (``request.read()`` would first raise the reader's buffer to the whole
limit and inflate that much at once), and capped *after* inflation at
:data:`MAX_BODY_BYTES`: past it the request is answered 413, which a forwarder answers by
splitting the batch (aiohttp then drains the rest in those same small pieces, and the
connection is closed after the answer). At most :data:`INGEST_SLOTS` bodies are read and
stored at a time: the others wait, their bytes in the socket buffers, for
:data:`SLOT_WAIT_S` at most, then get 503 with ``Retry-After``. Memory for ingest is
thereby bounded by the number of slots, not the number of clients.

Streams: the token lets a forwarder write; it does not tell streams apart, and every
workstation of a team may hold it. A forwarder therefore sends its stream's own random
write key (``Mplp-Stream-Key``), and the collector binds the stream to the first key that
writes it (only its hash is stored). A batch for a bound stream without that key is
refused with 403 ``stream_key_mismatch``: nobody can write as another's stream, forge its
sequence numbers or its reported backlog. A stream that no key ever wrote (forwarders from
before keys existed) stays writable without one, unless the collector requires keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from aiohttp import web

from mplp_lsp.forward.batching import STREAM_KEY_HEADER

__all__ = [
    "INGEST_SLOTS",
    "MAX_BODY_BYTES",
    "STREAM_KEY_HEADER",
    "IngestGate",
    "admit",
    "key_hash",
    "read_body",
    "stream_key_problem",
]

MAX_BODY_BYTES: Final = 8 * 2**20  # inflated; a forwarder's batch is 1 MiB by default
INGEST_SLOTS: Final = 2
SLOT_WAIT_S: Final = 10.0
_MAX_KEY_CHARS: Final = 256


class IngestGate:
    """At most ``slots`` requests read and store a body at once."""

    def __init__(self, slots: int = INGEST_SLOTS, wait: float = SLOT_WAIT_S) -> None:
        self._slots = asyncio.Semaphore(slots)
        self._wait = wait

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[bool]:
        """Yields whether a slot was free within the wait; holds it until the block ends."""
        try:
            async with asyncio.timeout(self._wait):
                await self._slots.acquire()
        except TimeoutError:
            yield False
            return
        try:
            yield True
        finally:
            self._slots.release()


StoreBatch = Callable[[bytes, str | None], Awaitable[web.Response]]


async def admit(request: web.Request, gate: IngestGate, store: StoreBatch) -> web.Response:
    """Read a batch within an ingest slot and hand it, with the stream key it came with, to
    ``store``: 503 when no slot frees in time, 413 past the cap."""
    async with gate.slot() as admitted:
        if not admitted:
            answer = {"error": "busy", "message": "too many batches at once; retry"}
            return web.json_response(answer, status=503, headers={"Retry-After": "1"})
        body = await read_body(request)
        if body is None:
            message = f"the body is larger than {MAX_BODY_BYTES} bytes once inflated"
            refused = web.json_response({"error": "body_too_large", "message": message}, status=413)
            refused.force_close()  # what is left of the body is drained, not kept for more
            return refused
        return await store(body, offered_key(request.headers.get(STREAM_KEY_HEADER)))


async def read_body(request: web.Request) -> bytes | None:
    """The body, inflated, or None when it grows past :data:`MAX_BODY_BYTES`."""
    declared = request.content_length
    if (
        declared is not None
        and declared > MAX_BODY_BYTES
        and "Content-Encoding" not in request.headers
    ):
        return None
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)


def key_hash(key: str) -> str:
    """What the collector keeps of a stream's key: the key is random, so a plain hash."""
    return hashlib.sha256(key.encode()).hexdigest()


def offered_key(value: str | None) -> str | None:
    """The ``Mplp-Stream-Key`` header's key; None when absent (an empty one too)."""
    if not value:
        return None
    return value[:_MAX_KEY_CHARS]


def stream_key_problem(bound: str | None, offered: str | None, *, required: bool) -> str | None:
    """Why a batch may not write its stream (an error code), or None.

    ``bound`` is the stored hash of the stream's key (None: no key ever wrote it),
    ``offered`` the key the batch came with. A stream with no key yet is bound by the
    caller to an offered key, in the same transaction as the batch.
    """
    if bound is None:
        return "stream_key_required" if offered is None and required else None
    if offered is None or not hmac.compare_digest(bound, key_hash(offered)):
        return "stream_key_mismatch"
    return None


PROBLEMS: Final = {
    "stream_key_mismatch": "this stream belongs to another forwarder (its Mplp-Stream-Key differs)",
    "stream_key_required": "this collector requires an Mplp-Stream-Key with every batch",
}

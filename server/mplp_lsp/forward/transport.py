"""What the forwarder needs of a transport: send a batch or a report, answer with a Reply.

:mod:`.sender` is the aiohttp one; nothing here imports aiohttp.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from mplp_lsp.forward.batching import Batch

__all__ = ["Reply", "Transport", "TransportError"]


@dataclass(frozen=True, slots=True)
class Reply:
    """The remote's answer: status, its ``Retry-After`` header, a short excerpt of an error's
    body, and a success's body (capped) with its content type."""

    status: int
    retry_after: str | None = None
    detail: str = ""
    body: bytes = b""
    content_type: str = ""


class TransportError(Exception):
    """No HTTP answer: connection refused or reset, timeout, TLS failure. Always retried.

    ``unreachable``: no connection could be made at all (refused, unknown host, no route),
    which a one-off run (``emit --remote``) does not wait out."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class Transport(Protocol):
    async def send(self, batch: Batch) -> Reply: ...

    async def report(self, body: bytes, headers: Mapping[str, str]) -> Reply: ...

    async def close(self) -> None: ...

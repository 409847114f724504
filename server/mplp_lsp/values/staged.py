"""Transactions for backends without their own: writes are staged, then applied together.

One transaction at a time (an asyncio lock). The task that opened it reads its staged
writes; any other task's read or write waits until it ends, so nobody sees half of it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

Apply = Callable[[dict[str, str]], Awaitable[None]]


class Staged:
    def __init__(self, apply: Apply) -> None:
        self._apply = apply
        self._lock = asyncio.Lock()
        self._pending: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
            f"vsl-staged-{id(self)}", default=None
        )

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[dict[str, str]]:
        pending = self._pending.get()
        if pending is not None:
            yield pending
            return
        async with self._lock:
            yield {}

    async def write(self, key: str, text: str) -> None:
        pending = self._pending.get()
        if pending is not None:
            pending[key] = text
            return
        async with self._lock:
            await self._apply({key: text})

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if self._pending.get() is not None:  # nested: part of the outer one
            yield
            return
        async with self._lock:
            pending: dict[str, str] = {}
            token = self._pending.set(pending)
            try:
                yield
            finally:
                self._pending.reset(token)
            await self._apply(pending)  # only reached when the body did not raise

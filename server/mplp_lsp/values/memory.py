"""The reference VSL: an in-process map (values stored encoded, so callers share nothing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mplp_lsp.values.base import check_key, decode, encode
from mplp_lsp.values.staged import Staged


class MemoryVsl:
    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._staged = Staged(self._apply)

    async def get(self, key: str, default: Any = None) -> Any:
        check_key(key)
        async with self._staged.reading() as pending:
            text = pending.get(key, self._values.get(key))
        return default if text is None else decode(text)

    async def set(self, key: str, value: Any) -> None:
        await self._staged.write(check_key(key), encode(value))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self._staged.transaction():
            yield

    async def _apply(self, writes: dict[str, str]) -> None:
        self._values.update(writes)

    async def close(self) -> None:
        return None

"""The default VSL: a SQLite file, with real transactions.

One connection on one thread (SQLite connections are not shared across threads). Writes are
durable when ``set`` returns (WAL, ``synchronous=FULL``). ``async with vsl.transaction():``
is ``BEGIN IMMEDIATE`` ... ``COMMIT`` on that connection; if the body raises it rolls back,
and if the process dies inside it SQLite's journal leaves the file at the state before it.
The task that opened a transaction reads its own writes; other tasks wait for it to end.
"""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from mplp_lsp.store.database import make_private
from mplp_lsp.values.base import check_key, decode, encode

T = TypeVar("T")

_SCHEMA = "CREATE TABLE IF NOT EXISTS vsl_values (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


class SqliteVsl:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mplp-vsl")
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()
        self._inside: contextvars.ContextVar[bool] = contextvars.ContextVar(
            f"vsl-sqlite-{id(self)}", default=False
        )

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            make_private(self.path)  # flow values may be anything a flow handled
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute(_SCHEMA)
            self._conn = conn
        return self._conn

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, lambda: fn(self._open()))

    async def get(self, key: str, default: Any = None) -> Any:
        check_key(key)

        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM vsl_values WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        if self._inside.get():
            text = await self._call(read)
        else:
            async with self._lock:
                text = await self._call(read)
        return default if text is None else decode(text)

    async def set(self, key: str, value: Any) -> None:
        check_key(key)
        text = encode(value)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO vsl_values (key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, text),
            )

        if self._inside.get():
            await self._call(write)  # part of the open transaction
        else:
            async with self._lock:
                await self._call(write)  # autocommit: its own durable transaction

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        if self._inside.get():  # nested: part of the outer one
            yield
            return
        async with self._lock:
            await self._call(lambda conn: conn.execute("BEGIN IMMEDIATE"))
            token = self._inside.set(True)
            try:
                yield
            except BaseException:
                await asyncio.shield(self._call(lambda conn: conn.execute("ROLLBACK")))
                raise
            finally:
                self._inside.reset(token)
            await self._call(lambda conn: conn.execute("COMMIT"))

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                await self._call(lambda conn: conn.close())
                self._conn = None
        self._thread.shutdown(wait=True)

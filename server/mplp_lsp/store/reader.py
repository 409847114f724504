"""A read-only connection beside the writer, for a consumer's own thread.

Reads that may take a while (graph queries, drift scans) use their own connection so they
never wait behind the writer's commits. If the writer salvages a damaged store while open
(:attr:`~mplp_lsp.store.writer.StoreWriter.generation` moves), the old file is gone from
under the path: the connection is reopened on the new store at its next use.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING

from mplp_lsp.store.database import connect

if TYPE_CHECKING:
    from mplp_lsp.store.writer import StoreWriter

__all__ = ["ReaderConnection"]


class ReaderConnection:
    """Use :meth:`get` and :meth:`close` on one thread only (SQLite connections are bound)."""

    __slots__ = ("_conn", "_generation", "_writer")

    def __init__(self, writer: StoreWriter) -> None:
        self._writer = writer
        self._conn: sqlite3.Connection | None = None
        self._generation = -1

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def get(self) -> sqlite3.Connection:
        generation = self._writer.generation
        if self._conn is None or self._generation != generation:
            self.close()
            self._conn = connect(self._writer.path, read_only=True)
            self._generation = generation
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(sqlite3.Error):  # a damaged file may not close cleanly
                conn.close()

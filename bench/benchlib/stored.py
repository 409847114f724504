"""How many events of a kind a store holds, polled as a benchmark waits for them."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class StoredCount:
    """The number of ``kind`` events in the store at ``database``, read over one read-only
    connection (made at the first poll the store exists for). Each poll reads only the rows
    added since the last: a full count at every poll would be work the bench puts on the
    machine it measures, growing with the store, hundreds of times a second."""

    def __init__(self, database: Path, kind: str = "file_update") -> None:
        self._database = database
        self._kind = kind
        self._conn: sqlite3.Connection | None = None
        self._last_seq = 0
        self._counted = 0

    def count(self) -> int:
        # Each autocommit SELECT is a read transaction of its own: it sees every commit. The
        # event log is append-only and numbered in commit order, so no row comes in below a
        # number already read.
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(
                    f"file:{self._database}?mode=ro", uri=True, check_same_thread=False
                )
            rows = self._conn.execute(
                "SELECT seq, kind FROM events WHERE seq > ? ORDER BY seq", (self._last_seq,)
            )
            for seq, kind in rows:
                self._last_seq = seq
                self._counted += kind == self._kind
        except sqlite3.OperationalError:  # not created yet
            self.close()
        return self._counted

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

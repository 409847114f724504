"""Where each durable bus consumer is in the event log, kept in the store.

The bus is in memory: an event is committed, then published to its consumers (PSG files,
Git, tools, CI). A crash in between would leave the graph behind the log for good. So each
of those consumers records the highest ``seq`` it has handled (meta ``consumer.<name>``)
after each batch, and at start reads the events after it from the log before taking new
ones (:class:`mplp_lsp.engine.bus.EventBus`). A batch handled but not yet recorded is handled
again after a crash: the consumers apply an event idempotently (a node takes an event's
state; a late event never moves it back).

A store that had events before positions existed starts its consumers at the log's end as
it was then (meta ``consumers.floor``, set by the upgrade): its graph was derived already.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import Final

from mplp_lsp.store.events import EventLog, StoredEvent
from mplp_lsp.store.writer import StoreWriter

FLOOR_KEY: Final = "consumers.floor"
CATCH_UP_CHUNK: Final = 5_000


def position_key(name: str) -> str:
    return f"consumer.{name}"


class ConsumerPosition:
    def __init__(self, writer: StoreWriter, name: str) -> None:
        self._writer = writer
        self._key = position_key(name)

    async def load(self) -> int:
        def read(conn: sqlite3.Connection) -> int:
            meta = EventLog(conn)
            value = meta.get_meta(self._key) or meta.get_meta(FLOOR_KEY) or "0"
            last = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
            # Never past the log's end: a salvaged store may have lost its last events, and
            # the events stored next reuse no number but must not be skipped.
            return min(int(value) if value.isdigit() else 0, int(last))

        return await self._writer.read(read)

    async def save(self, seq: int) -> None:
        await self._writer.run(lambda conn: EventLog(conn).set_meta(self._key, str(seq)))

    async def after(self, seq: int, kinds: Collection[str] | None) -> list[StoredEvent]:
        """The next events after ``seq`` (of ``kinds``), at most a chunk."""
        return await self._writer.read(
            lambda conn: EventLog(conn).query(kinds=kinds, after_seq=seq, limit=CATCH_UP_CHUNK)
        )

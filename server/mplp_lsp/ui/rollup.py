"""Keeps the timeline's hourly counts close to the log while the daemon runs.

The timeline folds whatever is new when it is read (:func:`mplp_lsp.ui.timeline.fold`);
without this, the first view after months of recording would count months of events. A bus
subscriber folds in the background once enough has accumulated or enough time has passed,
one small transaction at a time, so the intake never waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

from mplp_lsp.store.events import StoredEvent
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.ui import timeline

FOLD_EVERY_EVENTS: Final = 5_000
FOLD_EVERY_S: Final = 60.0


class RollupFolder:
    def __init__(self, writer: StoreWriter, clock: Callable[[], float] = time.monotonic) -> None:
        self._writer = writer
        self._clock = clock
        self._pending = 0
        self._last = clock()

    async def handle(self, events: Sequence[StoredEvent]) -> None:
        self._pending += len(events)
        if self._pending < FOLD_EVERY_EVENTS and self._clock() - self._last < FOLD_EVERY_S:
            return
        await self._writer.run(timeline.fold)
        self._pending, self._last = 0, self._clock()

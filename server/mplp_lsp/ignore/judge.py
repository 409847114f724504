"""Judging paths against the ignore rules on the event loop without reading a file there.

A path whose directories' ignore files are cached is judged at once. Otherwise the files are
read in a thread and the path is judged then, and every path submitted after it waits its
turn, so what is handed on keeps the order it came in (the debouncer relies on it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from mplp_lsp.ignore.rules import IgnoreRules

__all__ = ["InOrderJudge"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_STEP = 0.005  # seconds of judging between two turns of the event loop


class InOrderJudge:
    """Hands on the paths that ``rules()`` does not ignore, in the order they came."""

    _BATCH = 2_000  # paths whose files one thread hop reads

    def __init__(self, rules: Callable[[], IgnoreRules], on_ignored: Callable[[], None]) -> None:
        self._rules = rules
        self._on_ignored = on_ignored
        self._waiting: deque[tuple[str, Callable[[], None]]] = deque()
        self._drain: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def submit(self, path: str, admit: Callable[[], None]) -> bool | None:
        """Call ``admit()`` unless ``path`` is ignored: now, returning whether it was, or
        after the files it needs are read (None)."""
        rules = self._rules()
        if not self._waiting and not rules.unread(path):
            return self._judge(rules, path, admit)
        self._waiting.append((path, admit))
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(
                self._read_and_judge(), name="mplp-ignore-files"
            )
        return None

    def submit_many(
        self, entries: Sequence[tuple[str, T]], admit: Callable[[list[T]], None]
    ) -> None:
        """:meth:`submit` of each (path, item), in order: ``admit`` takes the items not
        ignored, a run of them at a time (each path's ignore files read once for the run)."""
        rules = self._rules()
        ignored = rules.ignored_many()
        admitted: list[T] = []
        for index, (path, item) in enumerate(entries):
            if self._waiting or rules.unread(path):
                if admitted:
                    admit(admitted)
                for later, held in entries[index:]:
                    self.submit(later, partial(admit, [held]))
                return
            if ignored(path):
                self._on_ignored()
            else:
                admitted.append(item)
        if admitted:
            admit(admitted)

    def _judge(self, rules: IgnoreRules, path: str, admit: Callable[[], None]) -> bool:
        if rules.is_ignored(path):
            self._on_ignored()
            return False
        admit()
        return True

    async def settled(self) -> None:
        """Wait until every path submitted so far is judged."""
        while self._drain is not None:
            await asyncio.shield(self._drain)

    async def _read_and_judge(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiting:
                rules = self._rules()
                batch = [path for path, _ in itertools.islice(self._waiting, self._BATCH)]
                rules.learn(await asyncio.to_thread(rules.read, batch))
                rules = self._rules()
                # What could not be learnt (rules forgotten meanwhile) is read again. A burst
                # into a new folder waits here whole (20,000 paths held the loop 240 ms): it
                # is judged a few milliseconds at a time; what comes meanwhile queues behind.
                step_ends = loop.time() + _STEP
                while self._waiting and not rules.unread(self._waiting[0][0]):
                    path, admit = self._waiting.popleft()
                    self._judge(rules, path, admit)
                    if loop.time() >= step_ends:
                        await asyncio.sleep(0)
                        rules = self._rules()
                        step_ends = loop.time() + _STEP
        except Exception:
            log.exception("reading ignore files failed; judging the waiting paths directly")
            while self._waiting:  # nothing submitted is lost
                path, admit = self._waiting.popleft()
                self._judge(self._rules(), path, admit)
        finally:
            self._drain = None

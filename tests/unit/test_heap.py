"""process.heap: what a recording process loaded to start is left out of full collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from mplp_lsp.process.heap import keep_started_objects


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def _collected() -> set[int]:
    return {id(obj) for generation in range(3) for obj in gc.get_objects(generation)}


@pytest.mark.usefixtures("unfrozen")
def test_what_is_loaded_at_start_leaves_the_collected_generations() -> None:
    started = [[index] for index in range(1000)]  # containers: the collector tracks them
    assert {id(obj) for obj in started} <= _collected()
    keep_started_objects()
    assert gc.get_freeze_count() >= len(started)
    assert not {id(obj) for obj in started} & _collected()
    later = [[0]]  # loaded after the start: still collected as usual
    assert id(later[0]) in _collected()

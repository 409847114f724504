"""A process that records lets a waiting thread in after 1 ms, not the interpreter's 5 ms."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from mplp_lsp.process.switching import RECORDING_SWITCH_INTERVAL, switch_quickly

pytestmark = pytest.mark.unit


@pytest.fixture
def interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("interval")
def test_a_recording_process_switches_threads_every_millisecond() -> None:
    sys.setswitchinterval(0.005)
    switch_quickly()
    assert sys.getswitchinterval() == pytest.approx(RECORDING_SWITCH_INTERVAL) == 0.001

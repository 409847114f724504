"""Since when a server can hear of its first folders: a client that held the editor's
activity before the server process started moves the first baseline's cut back, within a
bound; anything but a number of milliseconds leaves it at the process's start."""

from __future__ import annotations

import math

import pytest

from mplp_lsp.lsp.lifecycle import HELD_SINCE_LIMIT_NS, heard_since
from mplp_lsp.process.start import STARTED_NS

MS = 1_000_000


def test_a_moment_before_the_process_started_is_taken() -> None:
    held_ms = STARTED_NS // MS - 3_000
    assert heard_since(held_ms) == held_ms * MS


def test_a_moment_after_the_process_started_leaves_the_start() -> None:
    assert heard_since(STARTED_NS // MS + 60_000) == STARTED_NS


@pytest.mark.parametrize(
    "held_ms", [0, -1, STARTED_NS // MS - 3_600_000], ids=["epoch", "negative", "an-hour-back"]
)
def test_the_cut_goes_back_no_further_than_the_limit(held_ms: int) -> None:
    assert heard_since(held_ms) == STARTED_NS - HELD_SINCE_LIMIT_NS


@pytest.mark.parametrize(
    "junk", [None, "1700000000000", True, [1], {"ms": 1}, math.nan, math.inf, -math.inf]
)
def test_anything_but_milliseconds_leaves_the_start(junk: object) -> None:
    assert heard_since(junk) == STARTED_NS

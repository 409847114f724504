"""Tool invocation state: any order and any duplicates of its reports end in the same row."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.graph.tool_invocations import merge, read_invocation
from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.database import connect
from mplp_lsp.store.events import StoredEvent
from tests.support.properties import examples

INVOCATION = "6f1c8f4e-1d2b-4c3a-9e8f-0a1b2c3d4e5f"


def report(
    status: str, *, started: str | None, completed: str | None = None, **extra: Any
) -> StoredEvent:
    payload: dict[str, Any] = {
        "tool_id": "pytest-8.3.2",
        "tool_kind": "test_runner",
        "invocation_id": INVOCATION,
        "status": status,
        **extra,
    }
    if started:
        payload["started_at"] = started
    if completed:
        payload["completed_at"] = completed
    envelope = build_envelope(Kind.TOOL, payload, source_module="test")
    return StoredEvent(
        0,
        envelope["event_id"],
        Kind.TOOL.value,
        envelope["timestamp"],
        envelope["timestamp"],
        envelope,
    )


REPORTS = [
    report("pending", started=None),
    report("running", started="2026-01-01T10:00:00.000Z"),
    report("running", started="2026-01-01T10:00:00.250+00:00"),  # a retry's later start
    report(
        "succeeded",
        started="2026-01-01T10:00:00.000Z",
        completed="2026-01-01T10:00:09.000Z",
        exit_code=0,
        output_summary="12 passed",
    ),
]


def state_after(conn: sqlite3.Connection, events: list[StoredEvent]) -> tuple[Any, ...]:
    conn.execute("DELETE FROM tool_invocations")
    for event in events:
        merge(conn, event)
    found = read_invocation(conn, INVOCATION)
    assert found is not None
    return tuple(getattr(found, name) for name in found.__slots__)


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> sqlite3.Connection:
    return connect(Path(tmp_path_factory.mktemp("inv")) / "events.db")


def test_a_late_running_never_moves_a_finished_invocation_back(conn: sqlite3.Connection) -> None:
    state = state_after(conn, [REPORTS[3], REPORTS[1]])
    assert state[3] == "succeeded"
    assert state[6] == 0 and state[7] == "12 passed"


def test_duplicates_and_shuffles_end_in_the_same_state(conn: sqlite3.Connection) -> None:
    expected = state_after(conn, REPORTS)
    assert expected[3] == "succeeded"
    assert expected[4] == "2026-01-01T10:00:00.000Z"  # the earliest start reported
    shuffler = random.Random(7)
    for _ in range(100):
        deliveries = REPORTS + shuffler.choices(REPORTS, k=4)
        shuffler.shuffle(deliveries)
        assert state_after(conn, deliveries) == expected


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(range(len(REPORTS))), min_size=1), st.randoms())
def test_merge_is_order_independent(
    conn: sqlite3.Connection, picks: list[int], shuffler: random.Random
) -> None:
    events = [REPORTS[i] for i in picks]
    shuffled = events[:]
    shuffler.shuffle(shuffled)
    assert state_after(conn, events) == state_after(conn, shuffled)


def test_a_repeated_report_changes_nothing(conn: sqlite3.Connection) -> None:
    state_after(conn, [REPORTS[1]])
    assert merge(conn, REPORTS[1]) is False

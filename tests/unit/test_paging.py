"""The event log in the order events happened: the event's own time (``occurred_at``) as
SQLite computes it from the stored envelope, and the pages `events`, the timeline and the
export read it in. Real SQLite files; envelopes built as the intake builds them."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mplp_lsp.protocol.envelope import build_envelope, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store import paging
from mplp_lsp.store.database import transaction
from mplp_lsp.store.events import EventLog, NewEvent, encode_body
from tests.conftest import sample
from tests.support.properties import examples

ARRIVAL = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def _reset(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        conn.execute("DELETE FROM events")


def _store(conn: sqlite3.Connection, items: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Store an event per (kind, offset in seconds of its own time from ARRIVAL), arriving in
    the list's order; returns each one's (occurred_at, seq)."""
    events = []
    for index, (kind, offset) in enumerate(items):
        happened = utc_timestamp(ARRIVAL + timedelta(seconds=offset))
        arrived = utc_timestamp(ARRIVAL + timedelta(seconds=index))
        payload = sample(kind)
        if kind == "tool":
            payload["completed_at"] = happened
        elif kind == "ci":
            payload.pop("completed_at", None)
            payload["started_at"] = happened
        else:
            payload["timestamp"] = happened
        envelope = build_envelope(Kind(kind), payload, source_module="test", timestamp=arrived)
        key = envelope["event_id"]  # every event distinct
        events.append(NewEvent(envelope["event_id"], kind, key, arrived, envelope))
    stored = EventLog(conn).append(events)
    return [
        (utc_timestamp(ARRIVAL + timedelta(seconds=offset)), event.seq)
        for (_, offset), event in zip(items, stored, strict=True)
        if event is not None
    ]


_items = st.lists(
    st.tuples(
        st.sampled_from(["file_update", "git", "tool", "ci"]),
        # Many events share a second: the order between them is the order they were stored.
        st.integers(min_value=-90 * 86400, max_value=90 * 86400).map(lambda s: s - s % 7),
    ),
    max_size=40,
)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    items=_items,
    first=st.integers(1, 7),
    size=st.integers(1, 7),
    edges=st.tuples(st.integers(-100, 100), st.integers(-100, 100)),
)
def test_pages_give_every_event_of_the_window_once_in_the_order_they_happened(
    conn: sqlite3.Connection,
    items: list[tuple[str, int]],
    first: int,
    size: int,
    edges: tuple[int, int],
) -> None:
    _reset(conn)
    stored = _store(conn, items)
    since, until = (utc_timestamp(ARRIVAL + timedelta(days=d)) for d in sorted(edges))
    window = paging.Window(since=since, until=until)
    got = [
        (r[3], r[0]) for rows in paging.pages(conn, window, first=first, size=size) for r in rows
    ]
    assert got == sorted(position for position in stored if since <= position[0] < until)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(items=_items, count=st.integers(0, 45), kinds=st.sets(st.sampled_from(["git", "tool"])))
def test_the_newest_n_are_the_last_n_in_time_order(
    conn: sqlite3.Connection, items: list[tuple[str, int]], count: int, kinds: set[str]
) -> None:
    _reset(conn)
    _store(conn, items)
    window = paging.Window(kinds=tuple(sorted(kinds)) or None)
    every = [r for rows in paging.pages(conn, window) for r in rows]
    start = paging.newest_start(conn, window, count)
    newest = [r for rows in paging.pages(conn, window, start, total=count) for r in rows]
    # All of them when fewer than ``count`` match.
    assert newest == every[len(every) - min(count, len(every)) :]


def test_a_late_event_is_listed_where_it_happened_and_followed_where_it_arrived(
    conn: sqlite3.Connection,
) -> None:
    _reset(conn)
    stored = _store(conn, [("file_update", 0), ("git", 60), ("ci", -3600)])
    upto = paging.last_seq(conn)
    window = paging.Window(upto_seq=upto)
    assert [r[0] for r in paging.page(conn, window)] == [stored[2][1], stored[0][1], stored[1][1]]
    later = _store(conn, [("tool", -7200)])  # stored after the listing began
    assert [r[0] for r in paging.page(conn, window)] == [stored[2][1], stored[0][1], stored[1][1]]
    assert [r[0] for r in paging.stored_after(conn, paging.Window(), upto)] == [later[0][1]]


def _occurred(conn: sqlite3.Connection, kind: str, envelope: dict[str, Any]) -> str:
    _reset(conn)
    with transaction(conn):
        conn.execute(
            "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
            " VALUES ('e', ?, 'k', ?, ?, ?)",
            (kind, envelope["timestamp"], envelope["timestamp"], encode_body(envelope)),
        )
    return str(conn.execute("SELECT occurred_at FROM events").fetchone()[0])


@pytest.mark.parametrize(
    ("kind", "fields", "expected"),
    [
        ("file_update", {"timestamp": "2030-01-01T02:00:00+02:00"}, "2030-01-01T00:00:00.000Z"),
        ("git", {"timestamp": "2024-12-31T23:59:59.5Z"}, "2024-12-31T23:59:59.500Z"),
        (
            "tool",
            {"started_at": "2026-01-01T10:00:00Z", "completed_at": "2026-01-01T10:00:09Z"},
            "2026-01-01T10:00:09.000Z",
        ),
        ("tool", {"started_at": "2026-01-01T10:00:00Z"}, "2026-01-01T10:00:00.000Z"),
        ("ci", {"completed_at": "2026-02-01T00:00:00.250Z"}, "2026-02-01T00:00:00.250Z"),
        # No readable time of its own: the envelope's.
        ("file_update", {"timestamp": "not a time"}, "2026-05-04T09:00:00.000Z"),
        ("graph_update", {"timestamp": "2030-01-01T00:00:00Z"}, "2026-05-04T09:00:00.000Z"),
    ],
)
def test_an_events_own_time_is_its_payloads_instant_else_the_envelopes(
    conn: sqlite3.Connection, kind: str, fields: dict[str, str], expected: str
) -> None:
    payload: dict[str, Any] = {"status": "completed", **fields}
    envelope = {"event_id": "e", "timestamp": "2026-05-04T09:00:00.000Z", "payload": payload}
    assert _occurred(conn, kind, envelope) == expected

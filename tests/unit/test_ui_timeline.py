"""The timeline's buckets (hourly counts kept by folding, finer ones counted directly) and
the dashboard's one-time login codes."""

from __future__ import annotations

import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mplp_lsp.store.database import transaction
from mplp_lsp.ui import timeline
from mplp_lsp.ui.login import CODE_TTL, NONCE_TTL, SESSION_TTL, BrowserLogin
from tests.support.properties import examples

START = datetime(2026, 1, 31, 22, tzinfo=UTC)
KINDS = ("file_update", "git", "tool", "ci", "pipeline_stage", "graph_update", "runtime_execution")


def _reset(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        conn.execute("DELETE FROM events")
        conn.execute("DELETE FROM timeline_hours")
        conn.execute("DELETE FROM meta WHERE key = ?", (timeline.ROLLED_KEY,))


def _store(conn: sqlite3.Connection, events: list[tuple[str, str]]) -> None:
    with transaction(conn):
        base = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
        conn.executemany(
            "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body, minted)"
            " VALUES (?, ?, ?, ?, ?, '{}', 1)",
            [(f"e{base + i}", kind, f"k{base + i}", at, at) for i, (at, kind) in enumerate(events)],
        )


def _expected(events: list[tuple[str, str]], prefix: int) -> dict[str, list[int]]:
    counts: Counter[tuple[str, str]] = Counter(
        (at[:prefix], timeline._LANE_OF[k]) for at, k in events
    )
    out: dict[str, list[int]] = {}
    for (bucket, lane), n in counts.items():
        out.setdefault(bucket, [0] * len(timeline.LANES))[timeline.LANES.index(lane)] += n
    return out


_event = st.tuples(
    st.integers(min_value=0, max_value=5 * 86400 * 1000).map(
        lambda ms: timeline.shift("2026-01-31T22:00:00.000Z", ms / 1000)
    ),
    st.sampled_from(KINDS),
)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(first=st.lists(_event, max_size=40), later=st.lists(_event, max_size=40))
def test_buckets_count_every_event_once_however_the_folds_fall(
    conn: sqlite3.Connection, first: list[tuple[str, str]], later: list[tuple[str, str]]
) -> None:
    _reset(conn)
    _store(conn, first)
    with transaction(conn):
        assert timeline.fold(conn) == len(first)
    _store(conn, later)  # not folded yet: the reader folds before it counts
    assert timeline.behind(conn) is (len(later) > 0)
    with transaction(conn):
        timeline.fold(conn)
    assert not timeline.behind(conn)
    events = first + later
    end = timeline.shift("2026-02-06T00:00:00.000Z", 0)
    for unit in timeline.UNITS:
        found = timeline.buckets(conn, "2026-01-31T22:00:00.000Z", end, unit)
        assert dict((b, c) for b, c in found) == _expected(events, unit.prefix), unit.name
        assert [b for b, _ in found] == sorted(b for b, _ in found)


def test_the_unit_is_the_finest_that_keeps_the_buckets_few() -> None:
    def unit(seconds: float) -> str:
        start = "2026-03-01T00:00:00.000Z"
        return timeline.unit_for(start, timeline.shift(start, seconds)).name

    assert unit(60) == "second"
    assert unit(3600) == "10 seconds"
    assert unit(86400) == "10 minutes"
    assert unit(7 * 86400) == "hour"
    assert unit(180 * 86400) == "day"
    assert unit(5 * 365 * 86400) == "month"


def test_events_in_a_span_come_in_time_order_of_one_lane(conn: sqlite3.Connection) -> None:
    _reset(conn)
    at = (START + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    _store(conn, [(at, "git"), (at, "file_update"), ("2026-01-31T21:00:00.000Z", "git")])
    found = timeline.events_in(
        conn, "2026-01-31T22:00:00.000Z", "2026-01-31T23:00:00.000Z", "git", 10
    )
    assert [(e["kind"], e["timestamp"]) for e in found] == [("git", at)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_login_code_opens_one_session_once_with_a_nonce_of_the_login_page() -> None:
    login = BrowserLogin(Clock())
    code = login.issue_code()
    assert login.redeem(code, None) is None  # no login page loaded: no session
    assert login.redeem(code, "forged") is None
    session = login.redeem(code, login.issue_nonce())
    assert session is not None and login.valid_session(session)
    assert login.redeem(code, login.issue_nonce()) is None  # spent
    assert not login.valid_session("forged") and not login.valid_session(None)


def test_a_nonce_gets_one_try() -> None:
    login = BrowserLogin(Clock())
    nonce = login.issue_nonce()
    assert login.redeem("wrong", nonce) is None
    assert login.redeem(login.issue_code(), nonce) is None  # the nonce went with the wrong code


def test_codes_nonces_and_sessions_expire() -> None:
    clock = Clock()
    login = BrowserLogin(clock)
    late = login.issue_code()
    clock.now += CODE_TTL + 1
    assert login.redeem(late, login.issue_nonce()) is None
    stale = login.issue_nonce()
    clock.now += NONCE_TTL + 1
    assert login.redeem(login.issue_code(), stale) is None
    session = login.redeem(login.issue_code(), login.issue_nonce())
    assert session is not None
    clock.now += SESSION_TTL + 1
    assert not login.valid_session(session)

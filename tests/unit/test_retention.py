"""Retention's cut of the event log on a real SQLite store: which events go, which stay, and
that the timeline's counts and the removal counter stay true, for any log."""

from __future__ import annotations

import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import transaction
from mplp_lsp.store.retention import (
    REMOVED_COUNTER,
    Policy,
    horizon,
    remove_events,
    store_bytes,
)
from mplp_lsp.ui import timeline
from tests.support.properties import examples

NOW = datetime(2027, 6, 1, tzinfo=UTC)


def _reset(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        for table in ("events", "outbox", "outbox_dead", "timeline_hours", "counters"):
            conn.execute(f"DELETE FROM {table}")
        conn.execute("DELETE FROM meta WHERE key = ?", (timeline.ROLLED_KEY,))


# One event: stored how many days before NOW, and whether it waits for the remote ("queued")
# or was refused by it ("dead").
_event = st.tuples(st.integers(0, 800), st.sampled_from(["sent", "sent", "queued", "dead"]))


def _store(conn: sqlite3.Connection, events: list[tuple[int, str]], folded: int) -> None:
    """The events in the order given, each stored ``age`` days before NOW (not necessarily
    in order: a clock set back); the first ``folded`` counted into the timeline's hours."""
    with transaction(conn):
        for n, (age, fate) in enumerate(events, start=1):
            at = utc_timestamp(NOW - timedelta(days=age, seconds=n))
            conn.execute(
                "INSERT INTO events (seq, event_id, kind, dedup_key, timestamp, received_at,"
                " body, minted) VALUES (?, ?, 'git', ?, ?, ?, '{}', 1)",
                (n, f"e{n}", f"k{n}", at, at),
            )
            if fate == "queued":
                conn.execute(
                    "INSERT INTO outbox (sink, seq, bytes)"
                    " SELECT id, ?, 2 FROM outbox_sinks WHERE name = 'collector'",
                    (n,),
                )
            elif fate == "dead":
                conn.execute(
                    "INSERT INTO outbox_dead (sink, seq, status, reason, dead_at)"
                    " SELECT id, ?, 422, 'refused', ? FROM outbox_sinks WHERE name = 'collector'",
                    (n, at),
                )
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            (timeline.ROLLED_KEY, "0"),
        )
    # Fold the first ``folded`` as the timeline would have before the rest arrived.
    with transaction(conn):
        conn.execute(
            "INSERT INTO timeline_hours (hour, kind, count)"
            " SELECT substr(occurred_at, 1, 13), kind, count(*) FROM events WHERE seq <= ?"
            " GROUP BY 1, 2",
            (folded,),
        )
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (str(folded), timeline.ROLLED_KEY))


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    events=st.lists(_event, min_size=1, max_size=40),
    days=st.integers(1, 700),
    upto=st.integers(0, 45),
    folded=st.integers(0, 45),
    slice_size=st.integers(1, 7),
)
def test_the_cut_removes_only_what_is_old_sent_and_handled_and_keeps_the_counts(
    conn: sqlite3.Connection,
    events: list[tuple[int, str]],
    days: int,
    upto: int,
    folded: int,
    slice_size: int,
) -> None:
    _reset(conn)
    _store(conn, events, folded)
    cutoff = utc_timestamp(NOW - timedelta(days=days))
    cut = horizon(conn, Policy(days, 0), NOW, upto=upto)
    while remove_events(conn, cut.seq, slice_size):
        pass
    kept = {int(r[0]) for r in conn.execute("SELECT seq FROM events")}
    last = len(events)
    # The cut: the first event (in the log's order) stored since the cutoff, never past
    # what the consumers handled (upto), never past the newest.
    recent = (
        n
        for n, (age, _) in enumerate(events, start=1)
        if utc_timestamp(NOW - timedelta(days=age, seconds=n)) >= cutoff
    )
    expected_cut = min(next(recent, last), last, upto) if upto else 1
    assert cut.seq == max(expected_cut, 1)
    assert kept == {
        n for n, (_, fate) in enumerate(events, start=1) if n >= cut.seq or fate != "sent"
    }
    assert last in kept
    removed = last - len(kept)
    assert cut.removable == removed
    counter = conn.execute(
        "SELECT coalesce(sum(value), 0) FROM counters WHERE name = ?", (REMOVED_COUNTER,)
    ).fetchone()[0]
    assert counter == removed
    # The hours count exactly the folded events that are left.
    hours = Counter(
        {
            (hour, kind): count
            for hour, kind, count in conn.execute("SELECT hour, kind, count FROM timeline_hours")
        }
    )
    expected = Counter(
        (at[:13], kind)
        for at, kind in conn.execute(
            "SELECT occurred_at, kind FROM events WHERE seq <= ?", (folded,)
        )
    )
    assert hours == expected


def test_past_the_size_limit_the_oldest_go_until_it_fits(conn: sqlite3.Connection) -> None:
    _reset(conn)
    body = "x" * 3000
    with transaction(conn):
        for n in range(1, 1001):
            at = utc_timestamp(NOW - timedelta(minutes=1001 - n))
            conn.execute(
                "INSERT INTO events (seq, event_id, kind, dedup_key, timestamp, received_at,"
                " body, minted) VALUES (?, ?, 'git', ?, ?, ?, ?, 1)",
                (n, f"e{n}", f"k{n}", at, at, f'{{"pad":"{body}"}}'),
            )
    limit = store_bytes(conn) // 2
    cut = horizon(conn, Policy(0, limit), NOW)
    assert cut.reason == "size" and 300 < cut.removable < 700
    while remove_events(conn, cut.seq):
        pass
    conn.execute("PRAGMA incremental_vacuum")
    assert store_bytes(conn) <= limit * 1.1
    assert conn.execute("SELECT min(seq) FROM events").fetchone()[0] == cut.seq
    assert horizon(conn, Policy(365, 0), NOW).reason is None  # all recent enough

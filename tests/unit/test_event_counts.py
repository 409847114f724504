"""The counts status reads (events per kind, events received today) kept by the store as
events come and go, on real SQLite files: always what counting the log itself gives."""

from __future__ import annotations

import itertools
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.store import EventLog, connect, database
from mplp_lsp.store.database import transaction
from mplp_lsp.store.events import prepare_events
from tests.old_store import store_at_version
from tests.support.properties import examples
from tests.support.stores import make_event

pytestmark = pytest.mark.unit

KINDS = ("file_update", "git", "tool", "ci", "graph_update")
DAYS = ("2026-11-25", "2026-11-26", "2026-11-27")


def truth(conn: sqlite3.Connection, day: str) -> tuple[dict[str, int], int]:
    """What counting the log itself says."""
    by_kind = dict(conn.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall())
    (since,) = conn.execute("SELECT count(*) FROM events WHERE received_at >= ?", (day,)).fetchone()
    return by_kind, since


def append(
    conn: sqlite3.Connection, kinds: list[str], day: str, numbers: itertools.count[int]
) -> None:
    events = [make_event(next(numbers), kind=kind) for kind in kinds]
    with transaction(conn):
        EventLog(conn).append_prepared(prepare_events(events), received_at=f"{day}T10:00:00.000Z")


@dataclass(frozen=True)
class Append:
    kinds: list[str]
    day: str


@dataclass(frozen=True)
class Remove:  # as retention removes the oldest events
    first: int
    length: int


@dataclass(frozen=True)
class Resend:  # an event already stored, sent again: nothing stored, nothing counted
    n: int


_STEPS = st.lists(
    st.builds(Append, st.lists(st.sampled_from(KINDS), max_size=6), st.sampled_from(DAYS))
    | st.builds(Remove, st.integers(0, 40), st.integers(0, 10))
    | st.builds(Resend, st.integers(0, 40)),
    max_size=25,
)


@settings(max_examples=examples(100), deadline=None)
@given(steps=_STEPS, day=st.sampled_from(DAYS))
def test_the_kept_counts_are_the_logs_own_after_any_appends_and_removals(
    conn: sqlite3.Connection, steps: list[Append | Remove | Resend], day: str
) -> None:
    with transaction(conn):  # the earlier examples' events go as retention removes them
        conn.execute("DELETE FROM events")
    numbers = itertools.count()
    log = EventLog(conn)
    for step in steps:
        if isinstance(step, Append):
            append(conn, step.kinds, step.day, numbers)
        elif isinstance(step, Remove):
            first = conn.execute("SELECT coalesce(min(seq), 0) FROM events").fetchone()[0]
            start = first + step.first
            with transaction(conn):
                conn.execute(
                    "DELETE FROM events WHERE seq BETWEEN ? AND ?", (start, start + step.length)
                )
        else:
            log.append([make_event(step.n)])
    by_kind, since = truth(conn, day)
    assert log.counts_by_kind() == by_kind
    assert log.received_since(day) == since


def test_a_store_of_the_previous_release_is_counted_at_the_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    old = store_at_version(db, database.MIGRATIONS.index(database._EVENT_COUNTS))
    numbers = itertools.count()
    append(old, ["git", "git", "tool"], DAYS[0], numbers)
    append(old, ["file_update"], DAYS[2], numbers)
    old.close()
    conn = connect(db)
    log = EventLog(conn)
    assert log.counts_by_kind() == {"file_update": 1, "git": 2, "tool": 1}
    assert log.received_since(DAYS[1]) == 1
    append(conn, ["git"], DAYS[2], numbers)  # counted from then on by the store
    assert (log.counts_by_kind()["git"], log.received_since(DAYS[2])) == (3, 2)
    conn.close()

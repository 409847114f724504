"""Envelopes belong to the remote they were queued for, on real SQLite files.

The stateful test drives the outbox with random interleavings of appends, remote changes
(forwarding started with another remote, or switched off), deliveries, the user's requeue
and drop of held envelopes, and retention, against a model that knows which remote each
envelope was queued for: a remote is only ever sent what was queued for it or what the
user requeued to it, and nothing leaves except delivered or dropped by the user.
"""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mplp_lsp.forward import held, outbox
from mplp_lsp.forward.remote import remote_identity
from mplp_lsp.store import EventLog, connect
from mplp_lsp.store.retention import Policy, horizon, remove_events
from tests.support.forwarding import collector_sink, new_event, pending_seqs
from tests.support.properties import examples

REMOTES = ("http://127.0.0.1:7001", "http://127.0.0.1:7002", "https://team.example/mplp")
remotes = st.sampled_from(REMOTES)


class QueueForRemotes(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.conn = connect(Path(self._dir.name) / "s.db")
        self.log = EventLog(self.conn)
        outbox.enable(self.conn, collector_sink(self.conn), budget_bytes=2**40)
        self.next_id = 0
        self.queue_for: str | None = None  # the remote the outbox is for
        self.owner: dict[int, str | None] = {}  # queued or held seq -> its remote
        self.sent: dict[int, str] = {}  # delivered seq -> the remote that got it

    def teardown(self) -> None:
        self.conn.close()
        self._dir.cleanup()

    @rule(count=st.integers(1, 5))
    def append(self, count: int) -> None:
        stored = self.log.append([new_event(self.next_id + n) for n in range(count)])
        self.next_id += count
        for event in stored:
            assert event is not None  # every event is new: none is a duplicate
            self.owner[event.seq] = self.queue_for

    @rule(remote=remotes)
    def forward_to(self, remote: str) -> None:
        switch = held.claim(self.conn, collector_sink(self.conn), remote)
        assert switch.previous == self.queue_for
        if self.queue_for is None:  # queued before any remote was known: the first one's
            for seq, owner in self.owner.items():
                if owner is None:
                    self.owner[seq] = remote
        self.queue_for = remote

    @rule()
    def switch_forwarding_off(self) -> None:
        """A run without a remote: queuing goes on, nothing moves (the queue waits)."""
        outbox.enable(self.conn, collector_sink(self.conn), budget_bytes=2**40)

    @precondition(lambda self: self.queue_for is not None)
    @rule(most=st.integers(1, 7))
    def deliver(self, most: int) -> None:
        entries = outbox.peek(self.conn, collector_sink(self.conn), max_count=most, max_bytes=2**30)
        for entry in entries:
            assert self.owner[entry.seq] == self.queue_for, "sent to a remote it was not for"
        outbox.ack(self.conn, collector_sink(self.conn), [entry.seq for entry in entries])
        for entry in entries:
            self.sent[entry.seq] = self.owner.pop(entry.seq) or ""

    @rule(remote=st.none() | remotes)
    def user_requeues_held(self, remote: str | None) -> None:
        moved = held.requeue_held(self.conn, collector_sink(self.conn), remote)
        chosen = [s for s, o in self.owner.items() if o != self.queue_for and remote in (None, o)]
        assert moved == len(chosen)
        for seq in chosen:
            self.owner[seq] = self.queue_for

    @rule(remote=st.none() | remotes)
    def user_drops_held(self, remote: str | None) -> None:
        dropped = held.drop_held(self.conn, remote)
        chosen = [s for s, o in self.owner.items() if o != self.queue_for and remote in (None, o)]
        assert dropped == len(chosen)
        for seq in chosen:
            del self.owner[seq]

    @rule()
    def retention_removes_everything_it_may(self) -> None:
        later = datetime.now(UTC) + timedelta(days=30)  # every event is past its age
        cut = horizon(self.conn, Policy(max_age_days=1, max_bytes=0), later)
        remove_events(self.conn, cut.seq, limit=10_000)

    @invariant()
    def each_envelope_is_where_the_model_says(self) -> None:
        queued = set(pending_seqs(self.conn))
        held_rows = dict(self.conn.execute("SELECT seq, remote FROM outbox_held"))
        assert queued == {s for s, o in self.owner.items() if o == self.queue_for}
        assert held_rows == {s: o for s, o in self.owner.items() if o != self.queue_for}
        kept = {s for (s,) in self.conn.execute("SELECT seq FROM events")}
        assert set(self.owner) <= kept, "retention removed an envelope still owed to a remote"

    @invariant()
    def the_counts_agree_with_the_tables(self) -> None:
        state = outbox.read_state(self.conn, collector_sink(self.conn))
        assert state.pending == sum(1 for o in self.owner.values() if o == self.queue_for)
        assert state.queued_for == self.queue_for
        expected: dict[str, int] = {}
        for owner in self.owner.values():
            if owner != self.queue_for and owner is not None:
                expected[owner] = expected.get(owner, 0) + 1
        assert state.held == expected


QueueForRemotes.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=30, deadline=None
)
test_queue_for_remotes = QueueForRemotes.TestCase


def test_a_store_queued_before_remotes_were_recorded_gives_its_queue_to_the_first(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / "s.db")
    outbox.enable(conn, collector_sink(conn), budget_bytes=2**30)
    EventLog(conn).append([new_event(n) for n in range(3)])
    assert held.claim(conn, collector_sink(conn), REMOTES[1]) == held.Switch(None, 0, 0)
    assert outbox.read_state(conn, collector_sink(conn)).pending == 3
    assert held.claim(conn, collector_sink(conn), REMOTES[0]) == held.Switch(REMOTES[1], 3, 0)
    assert held.claim(conn, collector_sink(conn), REMOTES[1]) == held.Switch(REMOTES[0], 0, 3)


@pytest.mark.parametrize(
    ("typed", "identity"),
    [
        ("HTTP://Collector.Example:80/", "http://collector.example"),
        ("https://collector.example:443/team/", "https://collector.example/team"),
        ("https://user:secret@collector.example/x?token=1#f", "https://collector.example/x"),
        ("http://[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_a_remote_is_known_by_its_url_without_credentials_or_spelling(
    typed: str, identity: str
) -> None:
    assert remote_identity(typed) == identity


@pytest.mark.parametrize("typed", ["null", "ftp://host", "http://", "http://host:99999"])
def test_what_is_not_a_remote_url_is_refused(typed: str) -> None:
    with pytest.raises(ValueError):
        remote_identity(typed)


def test_held_entries_leave_no_trace_in_the_pending_counters(tmp_path: Path) -> None:
    conn: sqlite3.Connection = connect(tmp_path / "s.db")
    outbox.enable(conn, collector_sink(conn), budget_bytes=2**30)
    held.claim(conn, collector_sink(conn), REMOTES[0])
    EventLog(conn).append([new_event(n) for n in range(4)])
    held.claim(conn, collector_sink(conn), REMOTES[1])
    state = outbox.read_state(conn, collector_sink(conn))
    assert (state.pending, state.pending_bytes, state.held) == (0, 0, {REMOTES[0]: 4})
    (group,) = held.held_groups(conn)
    assert (group.remote, group.count) == (REMOTES[0], 4) and group.bytes > 0

"""The forwarding core without HTTP: retry table, Retry-After, backoff, batches, the outbox.

The outbox runs on real SQLite files; the stateful test drives it with random interleavings
of enqueue, send, remote store, ack, failure, crash and restart against a model remote.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mplp_lsp.config.settings import Settings
from mplp_lsp.forward import outbox
from mplp_lsp.forward.batching import encode_batch, split
from mplp_lsp.forward.outbox import Entry
from mplp_lsp.forward.remote import RemoteConfigError, resolve_remote
from mplp_lsp.forward.retry import Action, RetryPolicy, classify, parse_retry_after
from mplp_lsp.forward.sinks.collector import CollectorSink
from mplp_lsp.store import EventLog, connect, transaction
from tests.support.forwarding import collector_sink, new_event, pending_entries
from tests.support.properties import examples

# -- retry table -----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_2xx_is_delivered(status: int) -> None:
    assert classify(status, 10) is Action.DELIVERED


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 301, 307, 418, 507])
def test_transient_and_unknown_statuses_are_retried(status: int) -> None:
    assert classify(status, 10) is Action.RETRY
    assert classify(status, 1) is Action.RETRY


@pytest.mark.parametrize("status", [400, 413, 422])
def test_envelope_errors_split_a_batch_then_dead_letter_the_single_envelope(status: int) -> None:
    assert classify(status, 2) is Action.SPLIT
    assert classify(status, 1) is Action.DEAD


@pytest.mark.parametrize("status", [401, 403, 404])
def test_refusals_dead_letter_without_splitting(status: int) -> None:
    assert classify(status, 50) is Action.DEAD


def test_retry_after_in_seconds_and_as_http_date() -> None:
    now = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert (
        parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now)
        == 30.0
    )
    assert parse_retry_after(format_datetime(now - timedelta(hours=1), usegmt=True), now=now) == 0.0
    for garbage in (None, "", "soon", "-5", "1.5e9"):
        assert parse_retry_after(garbage) is None


@pytest.mark.parametrize("attempt", [0, 1, 5, 40, 10_000])
def test_backoff_is_full_jitter_under_an_exponential_ceiling(attempt: int) -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=300.0)
    ceiling = min(300.0, 2.0 ** min(attempt, 62))
    assert policy.delay(attempt, rand=lambda: 0.0) == 0.0
    assert policy.delay(attempt, rand=lambda: 0.999999) == pytest.approx(ceiling * 0.999999)


def test_retry_after_raises_the_wait_and_is_clamped() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=2.0, max_retry_after=60.0)
    assert policy.delay(0, 30.0, rand=lambda: 0.5) == 30.0
    assert policy.delay(0, 10_000.0, rand=lambda: 0.5) == 60.0
    assert policy.delay(3, 0.0, rand=lambda: 0.5) == 1.0  # backoff wins over a shorter ask


# -- batches -----------------------------------------------------------------------------------


def test_batch_body_carries_stream_seq_and_the_stored_envelope_bytes() -> None:
    entries = [Entry(3, "a", '{"event_id":"a","x":"é"}'), Entry(9, "b", '{"event_id":"b"}')]
    batch = encode_batch("stream-1", entries)
    decoded = json.loads(batch.body)
    assert decoded == {
        "source": "stream-1",
        "items": [
            {"seq": 3, "envelope": {"event_id": "a", "x": "é"}},
            {"seq": 9, "envelope": {"event_id": "b"}},
        ],
    }
    assert batch.idempotency_key == encode_batch("stream-1", entries).idempotency_key
    assert batch.idempotency_key != encode_batch("stream-1", entries[:1]).idempotency_key
    assert split(entries) == ([entries[0]], [entries[1]])


# -- remote configuration -------------------------------------------------------------------


def test_forwarding_is_off_without_a_url() -> None:
    assert resolve_remote(Settings(), None, env={}) is None


def test_url_sources_in_order_and_token_from_env_or_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    settings = Settings(remote_url="https://a.example", remote_token_file=str(token_file))
    remote = resolve_remote(settings, None, env={})
    assert remote is not None and CollectorSink().endpoint(remote.url) == "https://a.example/events"
    assert remote.token == "from-file" and "from-file" not in repr(remote)
    # The URL comes from the settings alone (their env layer has MPLP_LSP_REMOTE_URL).
    env = {"MPLP_LSP_REMOTE_URL": "https://b.example/x/", "MPLP_LSP_REMOTE_TOKEN": "from-env"}
    remote = resolve_remote(settings, None, env=env)
    assert remote is not None and (remote.url, remote.token) == ("https://a.example", "from-env")
    remote = resolve_remote(settings, "http://127.0.0.1:9/", env=env)
    assert remote is not None and remote.url == "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    "url",
    ["http://runtime.example", "ftp://a.example", "https://user:pw@a.example", "https://a/?t=1"],
)
def test_unsafe_remote_urls_are_refused(url: str) -> None:
    with pytest.raises(RemoteConfigError):
        resolve_remote(Settings(), url, env={})


def test_plain_http_to_another_host_needs_the_opt_in() -> None:
    settings = Settings(remote_allow_insecure_http=True)
    assert resolve_remote(settings, "http://runtime.example", env={}) is not None


# -- the outbox on SQLite --------------------------------------------------------------------


def _open(path: Path, budget: int = 2**40) -> tuple[sqlite3.Connection, EventLog]:
    conn = connect(path)
    outbox.enable(conn, collector_sink(conn), budget_bytes=budget)
    return conn, EventLog(conn)


def test_events_accepted_before_enabling_are_not_queued_and_after_are(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    log = EventLog(conn)
    log.append([new_event(1)])
    outbox.enable(conn, collector_sink(conn), budget_bytes=2**30)
    log.append([new_event(2), new_event(2)])  # the duplicate is not stored, nor queued
    entries = outbox.peek(conn, collector_sink(conn), max_count=10, max_bytes=2**20)
    assert [e.event_id for e in entries] == ["id-2"]
    assert outbox.read_state(conn, collector_sink(conn)).pending == 1


def test_a_failed_transaction_leaves_neither_event_nor_entry(tmp_path: Path) -> None:
    conn, log = _open(tmp_path / "s.db")
    with pytest.raises(RuntimeError), transaction(conn):
        log.append([new_event(1)])
        raise RuntimeError("crash before commit")
    assert outbox.read_state(conn, collector_sink(conn)).pending == 0
    assert log.query() == []


def test_overflow_drops_the_oldest_and_counts_it(tmp_path: Path) -> None:
    conn, log = _open(tmp_path / "s.db")
    log.append([new_event(0)])
    [first] = outbox.peek(conn, collector_sink(conn), max_count=1, max_bytes=2**20)
    one = len(first.body.encode())
    outbox.ack(conn, collector_sink(conn), [first.seq])
    conn.execute("UPDATE outbox_sinks SET budget_bytes = ?", (3 * one,))
    log.append([new_event(n) for n in range(1, 6)])
    state = outbox.read_state(conn, collector_sink(conn))
    assert (state.pending, state.overflow_dropped) == (3, 2)
    assert [
        e.event_id for e in outbox.peek(conn, collector_sink(conn), max_count=10, max_bytes=2**20)
    ] == [
        "id-3",
        "id-4",
        "id-5",
    ]
    assert len(log.query()) == 6  # the events themselves stay in the local log


def test_dead_letters_leave_the_queue_counted_and_can_be_requeued(tmp_path: Path) -> None:
    conn, log = _open(tmp_path / "s.db")
    log.append([new_event(n) for n in range(3)])
    entries = outbox.peek(conn, collector_sink(conn), max_count=10, max_bytes=2**20)
    assert (
        outbox.dead_letter(
            conn, collector_sink(conn), [entries[1].seq], status=400, reason="HTTP 400: bad"
        )
        == 1
    )
    assert [
        e.event_id for e in outbox.peek(conn, collector_sink(conn), max_count=10, max_bytes=2**20)
    ] == [
        "id-0",
        "id-2",
    ]
    state = outbox.read_state(conn, collector_sink(conn))
    assert (state.dead_lettered, state.pending, state.last_error) == (1, 2, "HTTP 400: bad")
    assert outbox.requeue_dead(conn) == 1
    assert outbox.read_state(conn, collector_sink(conn)).pending == 3


class OutboxModel(RuleBasedStateMachine):
    """Random enqueue / send / remote store / ack / fail / crash against a deduplicating remote."""

    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.path = Path(self._dir.name) / "s.db"
        self.conn, self.log = _open(self.path)
        self.next_id = 0
        self.accepted: list[str] = []  # acknowledged to the intake: committed
        self.remote: dict[tuple[str, str], int] = {}  # (source, event_id) -> times stored
        self.wire: list[str] = []
        self.in_flight: list[Entry] | None = None
        self.answered = False
        self.acked: set[str] = set()

    def teardown(self) -> None:
        # After any history, a drain delivers every accepted id, and stores each once.
        while True:
            entries = outbox.peek(
                self.conn, collector_sink(self.conn), max_count=7, max_bytes=2**20
            )
            if not entries:
                break
            self._store(entries)
            outbox.ack(self.conn, collector_sink(self.conn), [e.seq for e in entries])
        assert set(self.wire) >= set(self.accepted)
        assert all(times == 1 for times in self.remote.values())
        assert len(self.remote) == len(self.accepted)
        assert outbox.read_state(self.conn, collector_sink(self.conn)).pending == 0
        self.conn.close()
        self._dir.cleanup()

    def _store(self, entries: list[Entry]) -> None:
        for entry in entries:
            self.wire.append(entry.event_id)
            key = ("test", entry.event_id)
            if key not in self.remote:
                self.remote[key] = 1  # the remote deduplicates by (source, event_id)

    @rule(count=st.integers(1, 5), duplicate=st.booleans())
    def enqueue(self, count: int, duplicate: bool) -> None:
        events = [new_event(self.next_id + i) for i in range(count)]
        if duplicate and self.accepted:
            events.append(new_event(int(self.accepted[0].split("-")[1])))
        stored = self.log.append(events)
        self.accepted += [s.event_id for s in stored if s is not None]
        self.next_id += count

    @precondition(lambda self: self.in_flight is None)
    @rule(size=st.integers(1, 6))
    def send(self, size: int) -> None:
        entries = outbox.peek(self.conn, collector_sink(self.conn), max_count=size, max_bytes=2**20)
        self.in_flight = entries or None
        self.answered = False

    @precondition(lambda self: self.in_flight is not None and not self.answered)
    @rule()
    def remote_stores(self) -> None:
        assert self.in_flight is not None
        self._store(self.in_flight)
        self.answered = True

    @precondition(lambda self: self.in_flight is not None and self.answered)
    @rule()
    def ack(self) -> None:
        assert self.in_flight is not None
        outbox.ack(self.conn, collector_sink(self.conn), [e.seq for e in self.in_flight])
        self.acked |= {e.event_id for e in self.in_flight}
        self.in_flight = None

    @precondition(lambda self: self.in_flight is not None and not self.answered)
    @rule()
    def fail(self) -> None:
        outbox.record_failure(self.conn, collector_sink(self.conn), "connection refused")
        self.in_flight = None

    @rule()
    def crash_and_restart(self) -> None:
        # Whatever was in flight is forgotten; what was committed is all that survives.
        self.conn.close()
        self.conn, self.log = _open(self.path)
        self.in_flight = None

    @invariant()
    def pending_is_accepted_minus_acknowledged(self) -> None:
        pending = {
            e.event_id
            for e in outbox.peek(
                self.conn, collector_sink(self.conn), max_count=10**6, max_bytes=2**40
            )
        }
        assert pending == set(self.accepted) - self.acked
        state = outbox.read_state(self.conn, collector_sink(self.conn))
        assert state.pending == len(pending)
        assert state.delivered == len(self.acked)
        assert (state.pending, state.pending_bytes) == _counted_from_table(self.conn)


OutboxModel.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=30, deadline=None
)
test_outbox_model = OutboxModel.TestCase


def _counted_from_table(conn: sqlite3.Connection) -> tuple[int, int]:
    """The collector's pending entries counted one by one (its rows and its log tail)."""
    entries = pending_entries(conn)
    return len(entries), sum(len(entry.body.encode()) for entry in entries)


@settings(max_examples=examples(40), deadline=None)
@given(
    batches=st.lists(st.integers(1, 12), min_size=1, max_size=8),
    budget_entries=st.integers(1, 20),
)
def test_appends_past_the_budget_drop_exactly_the_oldest(
    batches: list[int], budget_entries: int
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        conn, log = _open(Path(scratch) / "s.db")
        log.append([new_event(100)])  # ids of three digits: every body has the same size
        [first] = outbox.peek(conn, collector_sink(conn), max_count=1, max_bytes=2**20)
        outbox.ack(conn, collector_sink(conn), [first.seq])
        budget = budget_entries * len(first.body.encode())
        conn.execute("UPDATE outbox_sinks SET budget_bytes = ?", (budget,))
        queued: list[int] = []
        for size in batches:
            start = 101 + len(queued)
            stored = log.append([new_event(n) for n in range(start, start + size)])
            queued += [s.seq for s in stored if s is not None]
            state = outbox.read_state(conn, collector_sink(conn))
            pending = [
                e.seq
                for e in outbox.peek(conn, collector_sink(conn), max_count=10**6, max_bytes=2**40)
            ]
            # Whatever is left is the newest of what was queued, within the budget, and no
            # more was dropped than needed: one more entry would not have fitted.
            assert pending == queued[len(queued) - len(pending) :]
            assert state.pending_bytes <= budget
            assert len(pending) == min(len(queued), budget_entries)
            assert state.overflow_dropped == len(queued) - len(pending)
            assert (state.pending, state.pending_bytes) == _counted_from_table(conn)
        conn.close()


def test_peek_respects_count_and_bytes_but_always_returns_one(tmp_path: Path) -> None:
    conn, log = _open(tmp_path / "s.db")
    log.append([new_event(n) for n in range(5)])
    assert len(outbox.peek(conn, collector_sink(conn), max_count=3, max_bytes=2**20)) == 3
    assert len(outbox.peek(conn, collector_sink(conn), max_count=5, max_bytes=1)) == 1
    entries: Any = outbox.peek(
        conn, collector_sink(conn), after_seq=3, max_count=5, max_bytes=2**20
    )
    assert [e.seq for e in entries] == [4, 5]

"""One outbox, a cursor per sink, on real SQLite files; and the OTLP sink's records and
its reading of answers.

The stateful test drives two sinks with random interleavings of appends, batches sent in
order (acknowledged, refused, or cut by a split), requeues of dead letters, remote changes
and budget cuts, against a model of which envelopes each sink still owes: every sink gets
each envelope queued for it exactly once or has it as a dead letter, held or dropped (and
counted), whatever the other does.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from mplp_lsp.config.settings import parse_settings
from mplp_lsp.forward import held, outbox
from mplp_lsp.forward.batching import Batch
from mplp_lsp.forward.remote import configured_remotes
from mplp_lsp.forward.retry import Action
from mplp_lsp.forward.sinks.otlp import OtlpSink
from mplp_lsp.forward.sinks.otlp_records import attributes, log_record
from mplp_lsp.forward.transport import Reply
from mplp_lsp.store import EventLog, connect
from tests.support.forwarding import new_event, pending_entries
from tests.support.properties import examples

pytestmark = pytest.mark.unit

SINKS = ("collector", "otlp")
sinks = st.sampled_from(SINKS)


class TwoSinks(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.conn = connect(Path(self._dir.name) / "s.db")
        self.log = EventLog(self.conn)
        self.ids = {name: outbox.ensure_sink(self.conn, name) for name in SINKS}
        for sink in self.ids.values():
            outbox.enable(self.conn, sink, budget_bytes=2**40)
        self.next = 0
        self.owed: dict[str, set[int]] = {name: set() for name in SINKS}
        self.sent: dict[str, list[int]] = {name: [] for name in SINKS}
        self.dead: dict[str, set[int]] = {name: set() for name in SINKS}
        self.held: set[tuple[int, str]] = set()  # (seq, the remote it is held for)

    def teardown(self) -> None:
        self.conn.close()
        self._dir.cleanup()

    @rule(count=st.integers(1, 6))
    def append(self, count: int) -> None:
        stored = self.log.append([new_event(self.next + n) for n in range(count)])
        self.next += count
        for name in SINKS:
            self.owed[name] |= {event.seq for event in stored if event is not None}

    @rule(name=sinks, size=st.integers(1, 5), refuse=st.booleans(), cut=st.integers(0, 4))
    def send(self, name: str, size: int, refuse: bool, cut: int) -> None:
        """The next batch of ``name``; a split sends only its first ``cut`` entries now."""
        sink = self.ids[name]
        entries = outbox.peek(self.conn, sink, max_count=size, max_bytes=2**30)
        assert [e.seq for e in entries] == sorted(self.owed[name])[: len(entries)]
        part = [e.seq for e in entries][: cut or None]
        if not part:
            return
        if refuse:
            assert outbox.dead_letter(self.conn, sink, part, status=400, reason="no") == len(part)
            self.dead[name] |= set(part)
        else:
            assert outbox.ack(self.conn, sink, part) == len(part)
            self.sent[name] += part
        self.owed[name] -= set(part)

    @rule(name=sinks)
    def requeue(self, name: str) -> None:
        moved = outbox.requeue_dead(self.conn, sink=self.ids[name])
        assert moved == len(self.dead[name])
        self.owed[name] |= self.dead[name]
        self.dead[name] = set()

    @rule(name=sinks, remote=st.sampled_from(("http://a.test", "http://b.test")))
    def claim(self, name: str, remote: str) -> None:
        target = f"{remote}/{name}"
        switch = held.claim(self.conn, self.ids[name], target)
        if switch.previous is not None and switch.previous != target:
            assert switch.held == len(self.owed[name])
            self.held |= {(seq, switch.previous) for seq in self.owed[name]}
            self.owed[name] = set()
        if switch.previous != target:  # what was held for this remote comes back
            back = {seq for seq, owner in self.held if owner == target}
            assert switch.released == len(back)
            self.owed[name] |= back
            self.held -= {(seq, target) for seq in back}

    @rule(name=sinks, keep=st.integers(0, 3))
    def squeeze(self, name: str, keep: int) -> None:
        """A budget that holds only the newest ``keep`` entries' bytes."""
        sink = self.ids[name]
        entries = pending_entries(self.conn, sink)
        budget = max(1, sum(len(e.body.encode()) for e in entries[len(entries) - keep :]))
        self.conn.execute("UPDATE outbox_sinks SET budget_bytes = ? WHERE id = ?", (budget, sink))
        outbox.trim_to_budget(self.conn)
        left = {e.seq for e in pending_entries(self.conn, sink)}
        assert left <= self.owed[name]
        dropped = sorted(self.owed[name] - left)
        assert dropped == sorted(self.owed[name])[: len(dropped)]  # the oldest go
        self.owed[name] = left
        self.conn.execute("UPDATE outbox_sinks SET budget_bytes = ? WHERE id = ?", (2**40, sink))

    @invariant()
    def each_sink_owes_what_the_model_says(self) -> None:
        for name, sink in self.ids.items():
            entries = pending_entries(self.conn, sink)
            assert [e.seq for e in entries] == sorted(self.owed[name])
            state = outbox.read_state(self.conn, sink)
            size = sum(len(e.body.encode()) for e in entries)
            assert (state.pending, state.pending_bytes) == (len(entries), size)
            assert state.dead_letters == len(self.dead[name])
            assert len(self.sent[name]) == len(set(self.sent[name]))  # never twice


test_two_sinks = TwoSinks.TestCase
test_two_sinks.settings = settings(max_examples=examples(60), stateful_step_count=30, deadline=None)


def test_a_sink_added_later_owes_only_what_was_accepted_after_it(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    log = EventLog(conn)
    first = outbox.ensure_sink(conn, "collector")
    outbox.enable(conn, first, budget_bytes=2**30)
    log.append([new_event(n) for n in range(3)])
    later = outbox.ensure_sink(conn, "otlp")
    outbox.enable(conn, later, budget_bytes=2**30)
    log.append([new_event(n) for n in range(3, 5)])
    assert [e.seq for e in pending_entries(conn, first)] == [1, 2, 3, 4, 5]
    assert [e.seq for e in pending_entries(conn, later)] == [4, 5]
    conn.close()


def test_retention_keeps_what_any_sink_still_owes(tmp_path: Path) -> None:
    from mplp_lsp.store.retention import remove_events

    conn = connect(tmp_path / "s.db")
    log = EventLog(conn)
    fast, slow = (outbox.ensure_sink(conn, name) for name in SINKS)
    for sink in (fast, slow):
        outbox.enable(conn, sink, budget_bytes=2**30)
    log.append([new_event(n) for n in range(10)])
    outbox.ack(conn, fast, list(range(1, 11)))
    outbox.ack(conn, slow, [1, 2, 3])
    assert remove_events(conn, below=11) == 3  # the slow sink still owes 4..10
    assert [e.seq for e in pending_entries(conn, slow)] == list(range(4, 11))
    conn.close()


# -- the OTLP sink ---------------------------------------------------------------------------


def _entry(seq: int, envelope: dict[str, object]) -> outbox.Entry:
    return outbox.Entry(seq, str(envelope.get("event_id")), json.dumps(envelope))


def _batch(size: int) -> Batch:
    return Batch(tuple(_entry(n, {"event_id": f"e{n}"}) for n in range(size)), b"")


@pytest.mark.parametrize(
    ("reply", "size", "action", "rejected"),
    [
        (Reply(200), 3, Action.DELIVERED, 0),
        (Reply(200, body=b"{}", content_type="application/json"), 3, Action.DELIVERED, 0),
        (
            Reply(
                200,
                body=b'{"partialSuccess":{"rejectedLogRecords":"1","errorMessage":"too old"}}',
                content_type="application/json",
            ),
            3,
            Action.DELIVERED,
            1,
        ),
        (
            Reply(
                200,
                body=b'{"partialSuccess":{"rejectedLogRecords":"3"}}',
                content_type="application/json",
            ),
            3,
            Action.DEAD,
            0,
        ),
        (Reply(200, body=b"not json", content_type="application/json"), 2, Action.DELIVERED, 0),
        (Reply(429, "2"), 3, Action.RETRY, 0),
        (Reply(502), 3, Action.RETRY, 0),
        (Reply(503, "1"), 1, Action.RETRY, 0),
        (Reply(504), 1, Action.RETRY, 0),
        (Reply(400), 4, Action.SPLIT, 0),
        (Reply(413), 4, Action.SPLIT, 0),
        (Reply(400), 1, Action.DEAD, 0),
        (Reply(401), 4, Action.DEAD, 0),
        (Reply(500), 4, Action.DEAD, 0),  # "MUST NOT be retried" (OTLP/HTTP)
    ],
)
def test_otlp_answers_are_read_as_the_specification_says(
    reply: Reply, size: int, action: Action, rejected: int
) -> None:
    verdict = OtlpSink().classify(reply, _batch(size))
    assert (verdict.action, verdict.rejected) == (action, rejected)
    if action is Action.RETRY:
        assert verdict.retry_after == reply.retry_after
    if action is Action.DEAD and reply.status == 200:
        assert "rejected 3 of 3" in verdict.reason


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    ["timestamp", "ref_name", "commit_id", "status", "exit_code", "branch_name", "file_path",
     "completed_at", "started_at", "repo_url", "run_id"]
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(
    kind=st.sampled_from(["git_operation", "ci_pipeline", "tool_execution", "file_update", "x"]),
    payload=st.dictionaries(_KEYS, _VALUES, max_size=8),
    stamp=_VALUES,
)
def test_a_payload_of_any_shape_maps_without_an_error(
    kind: str, payload: dict[str, object], stamp: object
) -> None:
    envelope = {"event_id": "e", "event_type": kind, "timestamp": stamp, "payload": payload}
    record = log_record(_entry(1, envelope))
    assert json.loads(record["body"]["stringValue"]) == envelope
    for key, value in attributes(envelope, payload).items():
        assert value is not None and value != "", key


# Times the records turn into timeUnixNano and observedTimeUnixNano.
_TIMES = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
).map(datetime.isoformat)


@settings(max_examples=examples(200), deadline=None)
@given(
    kind=st.sampled_from(["git_operation", "ci_pipeline", "tool_execution", "file_update", "x"]),
    payloads=st.lists(st.dictionaries(_KEYS, _TIMES | _VALUES, max_size=8), min_size=1, max_size=4),
    stamp=_TIMES | _VALUES,
    host=st.none() | st.text(),
)
def test_the_protobuf_body_is_the_json_request_as_protobuf_parses_it(
    kind: str, payloads: list[dict[str, object]], stamp: object, host: str | None
) -> None:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    from mplp_lsp.forward.sinks.otlp import _to_protobuf, resource_attributes
    from mplp_lsp.forward.sinks.otlp_records import logs_request

    entries = [
        _entry(seq, {"event_id": "e", "event_type": kind, "timestamp": stamp, "payload": payload})
        for seq, payload in enumerate(payloads, 1)
    ]
    request = logs_request(entries, resource_attributes("stream", "origin", host))
    expected = json_format.ParseDict(request, ExportLogsServiceRequest())
    found = ExportLogsServiceRequest.FromString(_to_protobuf(request))
    assert found == expected


def test_otlp_requests_are_gzip_by_default_and_name_their_encoding() -> None:
    import gzip

    from mplp_lsp.forward.sinks.kind import Stream

    entry = _entry(1, {"event_id": "e1", "event_type": "file_update", "payload": {}})
    batch = OtlpSink().encode(Stream("s"), [entry], None)
    assert batch.headers["Content-Encoding"] == "gzip"
    assert batch.headers["Content-Type"] == "application/json"
    request = json.loads(gzip.decompress(batch.body))
    [record] = request["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    assert record["body"]["stringValue"] == entry.body
    plain = OtlpSink(compression="none").encode(Stream("s"), [entry], None)
    assert "Content-Encoding" not in plain.headers and json.loads(plain.body) == request


# -- which sinks the settings configure --------------------------------------------------------


def test_the_short_forms_and_the_remotes_list_each_make_a_named_sink(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    settings, warnings = parse_settings(
        {
            "remoteUrl": "https://team.example/mplp",
            "otlpEndpoint": "http://127.0.0.1:4318",
            "remotes": [
                {"kind": "otlp", "url": "https://otel.example", "name": "vendor",
                 "tokenEnv": "VENDOR_TOKEN", "options": {"encoding": "protobuf"}},
                {"kind": "collector", "url": "https://backup.example", "name": "backup",
                 "tokenFile": str(token_file)},
                {"kind": "otlp", "url": "https://again.example"},  # "otlp" is taken
                {"kind": "otlp", "url": "http://192.0.2.1:4318", "name": "plain"},
            ],
        }
    )  # fmt: skip
    assert warnings == []
    env = {"VENDOR_TOKEN": "from-env", "MPLP_LSP_REMOTE_TOKEN": "team-secret"}
    found, problems = configured_remotes(settings, None, env)
    assert {name: (r.kind, r.url, r.token) for name, r in found.items()} == {
        "collector": ("collector", "https://team.example/mplp", "team-secret"),
        "otlp": ("otlp", "http://127.0.0.1:4318", None),
        "vendor": ("otlp", "https://otel.example", "from-env"),
        "backup": ("collector", "https://backup.example", "from-file"),
    }
    assert found["vendor"].options == {"encoding": "protobuf"}
    assert set(problems) == {"otlp (remotes)", "plain"}
    assert "give this remotes entry a name" in problems["otlp (remotes)"]
    assert "remoteAllowInsecureHttp" in problems["plain"]  # the same URL rules as remoteUrl
    assert "team-secret" not in repr(found) and "from-env" not in repr(found)


def test_the_top_of_the_status_is_the_collector_in_use_else_the_first_sink_in_use(
    tmp_path: Path,
) -> None:
    from mplp_lsp.forward.status import forward_status

    conn = connect(tmp_path / "s.db")
    otlp = outbox.ensure_sink(conn, "otlp")
    outbox.enable(conn, otlp, budget_bytes=2**30)
    EventLog(conn).append([new_event(n) for n in range(3)])
    url = "http://127.0.0.1:4318/v1/logs"
    running = {
        "state": "off",
        "remote": None,
        "sinks": {"otlp": {"state": "sending", "remote": url}},
    }
    # An OTLP sink alone: what the editors show is its state, not "off".
    top = forward_status(conn, running)
    assert top is not None
    assert (top["sink"], top["state"], top["remote"], top["depth"]) == ("otlp", "sending", url, 3)
    stored = forward_status(conn)  # the CLI reading the store without a daemon
    assert stored is not None and (stored["sink"], stored["state"]) == ("otlp", "queuing")
    # With the collector in use too, the top is the collector's, as before sinks.
    outbox.enable(conn, outbox.ensure_sink(conn, "collector"), budget_bytes=2**30)
    both = forward_status(conn, {**running, "state": "idle", "remote": "http://127.0.0.1:9"})
    assert both is not None and (both["sink"], both["state"]) == ("collector", "idle")
    assert set(both["sinks"]) == {"collector", "otlp"}
    conn.close()

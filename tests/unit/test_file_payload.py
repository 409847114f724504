"""The daemon's own file_update payloads, and the envelopes carrying them, are accepted
without the schema engines, with the verdicts the engines give, and every other payload or
envelope is still theirs to judge."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.engine.bus import EventBus
from mplp_lsp.engine.file_activity import file_submissions
from mplp_lsp.engine.intake import Intake, IntakeResult, Submission
from mplp_lsp.protocol.envelope import FamilyForm, build_envelope, new_id
from mplp_lsp.protocol.file_payload import (
    CHANGE_TYPES,
    ENVELOPE_FIELDS,
    FIELDS,
    plain_file_envelope,
    plain_file_update,
)
from mplp_lsp.protocol.kinds import SPECS, Kind
from mplp_lsp.protocol.schemas import load_json
from mplp_lsp.protocol.validator import EventValidator, default_validator
from mplp_lsp.sources.debounce import Change, Settled
from mplp_lsp.sources.files import EditorDocuments
from mplp_lsp.store import IntegrationErrorLog, StoreWriter
from tests.support.properties import examples

STAMP = "2026-03-02T08:00:00.123Z"
Shortcut = Callable[[Any], bool]
any_text = st.text(st.characters(codec=None, blacklist_categories=()), max_size=10)
texts = st.one_of(
    any_text,
    st.sampled_from(["", " ", "\t\n", "src/a.py", "é", "\x00", "\ud800", "a\u2028b"]),
)
stamps = st.one_of(
    st.sampled_from(
        [
            STAMP,
            "2026-02-29T00:00:00Z",  # not a leap year
            "2024-02-29T23:59:60.5+05:30",
            "2026-03-02 08:00:00Z",
            "2026-03-02T08:00:00",
            "2026-13-02T08:00:00Z",
            STAMP + "\n",
        ]
    ),
    texts,
)
# Values of every JSON type (and what no JSON parser makes: bool is not an integer here).
others = st.one_of(
    texts,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    """The daemon's shape, then maybe a field removed, retyped, or one added."""
    payload: dict[str, Any] = {
        "file_path": draw(texts),
        "change_type": draw(st.one_of(st.sampled_from(sorted(CHANGE_TYPES)), texts)),
        "timestamp": draw(stamps),
    }
    for name in ("language", "previous_path", "workspace_root"):
        if draw(st.booleans()):
            payload[name] = draw(texts)
    for name in ("lines_added", "lines_removed"):
        if draw(st.booleans()):
            payload[name] = draw(
                st.one_of(st.integers(min_value=-3, max_value=2**70), st.booleans())
            )
    if draw(st.booleans()):
        name = draw(st.sampled_from([*sorted(FIELDS), "change_summary", "encoding", "extra", ""]))
        payload[name] = draw(others)
    if draw(st.booleans()) and payload:
        del payload[draw(st.sampled_from(sorted(payload)))]
    return payload


def assert_the_engines_verdict(kind: Kind, data: dict[str, Any], plain: Shortcut) -> None:
    validator = default_validator()
    full = validator.checked(kind, data)
    assert validator.validate(kind, data) == full
    if plain(data):
        assert full.ok


def assert_only_parsed_dicts_take_it(data: dict[str, Any], plain: Shortcut) -> None:
    """What a client sends is JSON-parsed: the same data after a round trip is judged the
    same; any other mapping or a subclass goes to the engines."""

    class Subclass(dict[str, Any]):
        pass

    assert not plain(Subclass(data))
    try:
        parsed = json.loads(json.dumps(data))
    except (UnicodeEncodeError, ValueError):
        return
    assert plain(parsed) == plain(data)


@settings(max_examples=examples(1000))
@given(payload=payloads())
def test_the_shortcut_gives_the_engines_verdict(payload: dict[str, Any]) -> None:
    assert_the_engines_verdict(Kind.FILE_UPDATE, payload, plain_file_update)


@given(payload=payloads())
def test_only_a_dict_of_the_shape_takes_the_shortcut(payload: dict[str, Any]) -> None:
    assert_only_parsed_dicts_take_it(payload, plain_file_update)


@given(
    paths=st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=8),
        min_size=1,
        max_size=5,
    ),
    change=st.sampled_from(list(Change)),
    root=st.sampled_from([None, "/home/dev/project"]),
)
def test_the_daemons_own_file_events_take_the_shortcut(
    paths: list[str], change: Change, root: str | None
) -> None:
    """What file_submissions builds from settled changes is the shape the shortcut knows."""
    documents = EditorDocuments()
    batch = []
    for index, name in enumerate(paths):
        path = f"src/{index}/{name}"
        documents.opened(path, "python", "a\n")
        documents.saved(path, "a\nb\n")
        previous = f"old/{index}" if change is Change.RENAMED else None
        batch.append(Settled(path, change, previous, 0.0, 0.0, 1, {"timestamp": STAMP}))
    for submission in file_submissions(batch, documents, root):
        if submission.data["file_path"].strip():
            assert plain_file_update(submission.data), submission.data


def test_the_shortcut_mirrors_the_schema_and_the_invariants_it_was_written_for() -> None:
    """If the file_update schema or its invariants change, this module must be read again."""
    schema = load_json(SPECS[Kind.FILE_UPDATE].schema)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["file_path", "change_type", "timestamp"]
    assert {
        name: {key: value for key, value in rules.items() if key != "description"}
        for name, rules in schema["properties"].items()
    } == {
        "file_path": {"type": "string", "minLength": 1},
        "change_type": {"type": "string", "enum": ["created", "modified", "deleted", "renamed"]},
        "workspace_root": {"type": "string"},
        "change_summary": {"type": "string"},
        "timestamp": {"type": "string", "format": "date-time"},
        "lines_added": {"type": "integer", "minimum": 0},
        "lines_removed": {"type": "integer", "minimum": 0},
        "previous_path": {"type": "string"},
        "encoding": {"type": "string"},
        "language": {"type": "string"},
    }
    scope = default_validator().integration_invariants.for_scope(
        SPECS[Kind.FILE_UPDATE].invariant_scope
    )
    assert [(i.path, i.rule.text, i.when_present, dict(i.when)) for i in scope] == [
        ("file_path", "non-empty-string", False, {}),
        ("change_type", "enum(created,modified,deleted,renamed)", False, {}),
        ("timestamp", "iso-datetime", False, {}),
    ]


ENVELOPE_ID = "4f489694-9ac4-4ca1-9c7a-0c754cd5d499"
event_ids = st.one_of(
    st.just(ENVELOPE_ID),
    st.uuids().map(str),  # any version: a uuid to the schema, not to the invariant
    st.sampled_from([ENVELOPE_ID.upper(), ENVELOPE_ID[:-1], ENVELOPE_ID + " ", ""]),
    texts,
)


plain_payloads = st.builds(
    lambda path, change, stamp, counts: {
        "file_path": path,
        "change_type": change,
        "timestamp": stamp,
        "language": "python",
        **counts,
    },
    st.one_of(st.just("src/a.py"), any_text.filter(str.strip)),
    st.sampled_from(sorted(CHANGE_TYPES)),
    st.sampled_from([STAMP, "2024-02-29T23:59:60.5+05:30"]),
    st.sampled_from([{}, {"lines_added": 0, "lines_removed": 3}]),
)
names = st.sampled_from(["", " ", "x", "forward"])
# What each field of an envelope may be changed to: its near misses, or any value.
NEAR_MISSES: dict[str, st.SearchStrategy[Any]] = {
    "event_id": st.one_of(st.uuids().map(str), st.uuids().map(lambda u: str(u).upper()), event_ids),
    "event_family": st.sampled_from(
        [*(str(form) for form in FamilyForm), "graph_update", "externalintegrationevent", ""]
    ),
    "event_type": st.sampled_from(
        ["git_operation", "ci_pipeline", "tool_execution", "", "file_update ", "File_update"]
    ),
    "timestamp": stamps,
    "source_module": st.one_of(names, texts),
    "source": st.one_of(names, texts),
    "project_id": st.one_of(st.uuids().map(str), event_ids),
    "payload": payloads(),
    "extra": others,
    "": others,
}


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """An envelope around a file_update payload as forwarders send it, then up to two of its
    fields removed or changed, or others added."""
    envelope: dict[str, Any] = {
        "event_id": draw(st.one_of(st.just(ENVELOPE_ID), st.uuids(version=4).map(str))),
        "event_family": str(draw(st.sampled_from(list(FamilyForm)))),
        "event_type": "file_update",
        "timestamp": draw(st.sampled_from([STAMP, "2024-02-29T23:59:60.5+05:30"])),
        "source_module": draw(st.one_of(st.just("forward"), texts)),
        "source": draw(st.one_of(st.just("mplp-lsp/0.1.0"), texts)),
        "payload": draw(plain_payloads),
    }
    if draw(st.booleans()):
        envelope["project_id"] = draw(st.uuids().map(str))
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(sorted(NEAR_MISSES)))
        if name in envelope and draw(st.integers(0, 3)) == 0:
            del envelope[name]
        else:
            envelope[name] = draw(st.one_of(NEAR_MISSES[name], others))
    return envelope


@settings(max_examples=examples(1000))
@given(envelope=envelopes())
def test_the_envelope_shortcut_gives_the_engines_verdict(envelope: dict[str, Any]) -> None:
    assert_the_engines_verdict(Kind.ENVELOPE, envelope, plain_file_envelope)


@given(envelope=envelopes())
def test_only_a_dict_of_the_envelopes_shape_takes_the_shortcut(envelope: dict[str, Any]) -> None:
    assert_only_parsed_dicts_take_it(envelope, plain_file_envelope)


@given(family=st.sampled_from(list(FamilyForm)), project=st.booleans())
def test_what_forwarders_send_takes_the_envelope_shortcut(
    family: FamilyForm, project: bool
) -> None:
    """The daemon's own file events, enveloped as the outbox forwards them."""
    documents = EditorDocuments()
    documents.opened("src/a.py", "python", "a\n")
    documents.saved("src/a.py", "a\nb\n")
    batch = [Settled("src/a.py", Change.MODIFIED, None, 0.0, 0.0, 1, {"timestamp": STAMP})]
    for submission in file_submissions(batch, documents, "/home/dev/project"):
        envelope = build_envelope(
            Kind.FILE_UPDATE, submission.data, source_module="forward", family=family
        )
        if project:
            envelope["project_id"] = new_id()
        assert plain_file_envelope(envelope), envelope


def test_the_envelope_shortcut_mirrors_the_schema_and_the_invariants_it_was_written_for() -> None:
    """If the envelope schema or the observability invariants of its family change, this
    module must be read again."""
    schema = load_json(SPECS[Kind.ENVELOPE].schema)
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == ENVELOPE_FIELDS - {"project_id"}
    assert schema["properties"] == {
        "event_id": {"type": "string", "format": "uuid"},
        "event_family": {
            "type": "string",
            "enum": ["ExternalIntegrationEvent", "external_integration"],
        },
        "event_type": {
            "type": "string",
            "enum": ["file_update", "git_operation", "ci_pipeline", "tool_execution"],
        },
        "timestamp": {"type": "string", "format": "date-time"},
        "project_id": {"type": "string", "format": "uuid"},
        "source_module": {"type": "string", "minLength": 1},
        "source": {"type": "string", "minLength": 1},
        "payload": {"type": "object"},
    }
    assert schema["allOf"][0] == {
        "if": {"properties": {"event_type": {"const": "file_update"}}, "required": ["event_type"]},
        "then": {
            "properties": {"payload": {"$ref": "../integration/mplp-file-update-event.schema.json"}}
        },
    }
    invariants = default_validator().observability_invariants.for_scope("event")
    assert [
        (i.path, i.rule.text, i.when_present)
        for i in invariants
        if i.applies_to({"event_family": "external_integration"})
    ] == [
        ("event_id", "uuid-v4", False),
        ("event_type", "non-empty-string", False),
        ("event_family", i_family_rule(invariants), False),
        ("timestamp", "iso-datetime", False),
    ]


def i_family_rule(invariants: tuple[Any, ...]) -> str:
    """The family rule's text; it must admit the upstream name of the envelope's family."""
    (rule,) = [i.rule.text for i in invariants if i.path == "event_family"]
    assert "external_integration" in rule.removeprefix("enum(").removesuffix(")").split(",")
    return str(rule)


class EnginesOnly(EventValidator):
    """The validator as it was before the shortcut: both engines and the invariants."""

    def validate(self, kind: Kind, data: Any) -> Any:
        return self.checked(kind, data)


@settings(max_examples=examples(40))
@given(batch=st.lists(st.tuples(payloads(), st.booleans()), max_size=12))
def test_the_intake_stores_what_it_stored_without_the_shortcut(
    batch: list[tuple[dict[str, Any], bool]],
) -> None:
    """Same verdicts, same dedup keys, same envelopes (but for the minted id and time)."""
    submissions = [
        Submission(Kind.FILE_UPDATE, payload, "watch", trusted_paths=trusted)
        for payload, trusted in batch
    ]
    with tempfile.TemporaryDirectory() as name:
        fast, full = asyncio.run(
            _through_two_intakes(Path(name), submissions, (default_validator(), ENGINES_ONLY))
        )
    assert fast == full


ENGINES_ONLY = EnginesOnly()


async def _through_two_intakes(
    tmp: Path, submissions: list[Submission], validators: tuple[EventValidator, ...]
) -> list[list[tuple[object, ...]]]:
    root = tmp / "ws"
    root.mkdir()
    outcomes = []
    for index, validator in enumerate(validators):
        writer = StoreWriter(tmp / f"events-{index}.db")
        await writer.start()
        bus = EventBus()
        log = IntegrationErrorLog(tmp / f"errors-{index}.jsonl")
        intake = Intake(writer, bus, log, root=root.resolve(), validator=validator)
        try:
            results = await intake.submit_many(submissions)
            keys = await writer.read(
                lambda conn: [row[0] for row in conn.execute("SELECT dedup_key FROM events")]
            )
        finally:
            await bus.close()
            await writer.close()
            log.close()
        outcomes.append([*map(_seen, results), tuple(keys)])
    return outcomes


def _seen(result: IntakeResult) -> tuple[object, ...]:
    if result.event is None:
        return result.outcome, result.result
    envelope = {**result.event.envelope, "event_id": None, "timestamp": None}
    return result.outcome, result.result, result.event.kind, envelope

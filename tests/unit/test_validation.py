"""Schema + invariant validation of payloads, envelopes and observability events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.protocol.envelope import FamilyForm, build_envelope
from mplp_lsp.protocol.kinds import PAYLOAD_KINDS, SPECS, Kind, detect_kind
from mplp_lsp.protocol.schemas import load_json
from mplp_lsp.protocol.validator import default_validator, validate
from tests.conftest import sample

ALL_KINDS = [kind for kind in Kind if kind is not Kind.ENVELOPE]


def set_at(obj: Any, path: tuple[str | int, ...], value: Any) -> None:
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


def enum_locations(
    schema: dict[str, Any], here: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], list[str]]]:
    for name, sub in schema.get("properties", {}).items():
        if "enum" in sub:
            yield (*here, name), sub["enum"]
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            yield from enum_locations(sub["items"], (*here, name, 0))


ENUM_CASES = [
    (kind, path, value)
    for kind in PAYLOAD_KINDS
    for path, values in enum_locations(load_json(SPECS[kind].schema))
    for value in values
]


@pytest.mark.parametrize("kind", ALL_KINDS, ids=str)
def test_project_fixture_is_valid(kind: Kind) -> None:
    assert validate(kind, sample(kind.value)).to_dict() == {"ok": True, "errors": []}


@pytest.mark.parametrize(("kind", "path", "value"), ENUM_CASES, ids=lambda x: str(x))
def test_every_enum_value_is_accepted(kind: Kind, path: tuple[str | int, ...], value: str) -> None:
    data = sample(kind.value)
    set_at(data, path, value)
    assert validate(kind, data).ok


@pytest.mark.parametrize(
    ("kind", "path"),
    sorted({(kind, path) for kind, path, _ in ENUM_CASES}),
    ids=lambda x: str(x),
)
def test_a_value_outside_each_enum_is_rejected(kind: Kind, path: tuple[str | int, ...]) -> None:
    data = sample(kind.value)
    set_at(data, path, "Succeeded")  # near-miss: wrong case
    result = validate(kind, data)
    expected_path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    assert not result.ok
    assert ("enum", expected_path) in [(e.code, e.path) for e in result.errors]


@pytest.mark.parametrize(
    "family_value",
    ["pipeline_stage", "graph_update", "runtime_execution"],
)
def test_observability_enums(family_value: str) -> None:
    field = {
        "pipeline_stage": "stage_status",
        "graph_update": "update_kind",
        "runtime_execution": "status",
    }[family_value]
    schema = load_json(SPECS[Kind(family_value)].schema)
    allowed = schema["allOf"][1]["properties"][field]["enum"]
    for value in allowed:
        event = sample(family_value)
        event[field] = value
        assert validate(Kind(family_value), event).ok, value
    event = sample(family_value)
    event[field] = "cancelled" if "cancelled" not in allowed else "paused"
    assert "enum" in validate(Kind(family_value), event).codes


V4 = "3f1c2a4e-8b7d-4c2e-9a1f-0d5e6b7c8a90"
NOT_V4 = {
    "uppercase": V4.upper(),
    "v1": "3f1c2a4e-8b7d-1c2e-9a1f-0d5e6b7c8a90",
    "v5": "3f1c2a4e-8b7d-5c2e-9a1f-0d5e6b7c8a90",
    "v7": "018f1c2a-4e8b-7d4c-9a1f-0d5e6b7c8a90",
    "bad variant": "3f1c2a4e-8b7d-4c2e-7a1f-0d5e6b7c8a90",
    "no hyphens": V4.replace("-", ""),
    "braces": "{" + V4 + "}",
    "trailing newline": V4 + "\n",
    "short": V4[:-1],
}


@pytest.mark.parametrize("label", NOT_V4)
def test_tool_invocation_id_must_be_lowercase_v4(label: str) -> None:
    data = sample("tool")
    data["invocation_id"] = NOT_V4[label]
    result = validate(Kind.TOOL, data)
    assert [(e.path, e.code) for e in result.errors] == [("invocation_id", "pattern")]


@pytest.mark.parametrize("label", ["uppercase", "v1", "v5", "v7", "bad variant"])
def test_envelope_event_id_must_be_v4_even_when_it_is_a_uuid(label: str) -> None:
    envelope = build_envelope(
        Kind.TOOL, sample("tool"), source_module="test", event_id=NOT_V4[label]
    )
    result = validate(Kind.ENVELOPE, envelope)
    assert [(e.path, e.code) for e in result.errors] == [("event_id", "invariant_uuid_v4")]


@pytest.mark.parametrize("label", ["no hyphens", "braces", "short"])
def test_envelope_event_id_that_is_no_uuid_is_a_format_error(label: str) -> None:
    envelope = build_envelope(
        Kind.TOOL, sample("tool"), source_module="test", event_id=NOT_V4[label]
    )
    assert [(e.path, e.code) for e in validate(Kind.ENVELOPE, envelope).errors] == [
        ("event_id", "format")
    ]


GOOD_TIMES = [
    "2024-02-29T23:59:59Z",
    "2025-01-01T00:00:00.1+05:30",
    "2025-01-01t00:00:00z",
    "1990-12-31T23:59:60Z",
    "2025-06-30T12:00:00.123456789-08:00",
    "0001-01-01T00:00:00Z",
]
BAD_TIMES = [
    "2023-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2025-13-01T00:00:00Z",
    "2025-04-31T00:00:00Z",
    "2025-00-10T00:00:00Z",
    "2025-01-01T24:00:00Z",
    "2025-01-01T00:60:00Z",
    "2025-01-01T00:00:61Z",
    "2025-01-01 00:00:00Z",
    "2025-01-01T00:00:00",
    "2025-01-01",
    "2025-01-01T00:00:00+24:00",
    "2025-01-01T00:00:00+0100",
    "2025-01-01T00:00:00.Z",
    "2025-01-01T00:00:00Z\n",
    " 2025-01-01T00:00:00Z",
    "２０２５-01-01T00:00:00Z",
    "",
]


@pytest.mark.parametrize("value", GOOD_TIMES)
def test_date_time_accepted(value: str) -> None:
    data = sample("file_update")
    data["timestamp"] = value
    assert validate(Kind.FILE_UPDATE, data).ok


@pytest.mark.parametrize("value", BAD_TIMES)
def test_date_time_rejected_once_as_format(value: str) -> None:
    data = sample("file_update")
    data["timestamp"] = value
    result = validate(Kind.FILE_UPDATE, data)
    # the invariant (iso-datetime) agrees but is not reported twice for the same path
    assert [(e.path, e.code) for e in result.errors] == [("timestamp", "format")]


@pytest.mark.parametrize("kind", PAYLOAD_KINDS, ids=str)
def test_each_required_field_is_reported_by_name(kind: Kind) -> None:
    schema = load_json(SPECS[kind].schema)
    for name in schema["required"]:
        data = sample(kind.value)
        del data[name]
        result = validate(kind, data)
        assert [(e.path, e.code) for e in result.errors] == [(name, "required")], name


@pytest.mark.parametrize("kind", PAYLOAD_KINDS, ids=str)
def test_payloads_are_closed(kind: Kind) -> None:
    data = sample(kind.value)
    data["source"] = "adapter/1.0"
    data["$comment"] = "hello"
    result = validate(kind, data)
    assert sorted((e.path, e.code) for e in result.errors) == [
        ("$comment", "extra_forbidden"),
        ("source", "extra_forbidden"),
    ]


def test_nested_errors_use_bracket_paths() -> None:
    data = sample("ci")
    data["stages"][1]["status"] = "done"
    data["stages"][2]["extra"] = 1
    data["stages"][0]["duration_ms"] = -1
    result = validate(Kind.CI, data)
    assert sorted((e.path, e.code) for e in result.errors) == [
        ("stages[0].duration_ms", "minimum"),
        ("stages[1].status", "enum"),
        ("stages[2].extra", "extra_forbidden"),
    ]


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("lines_added", 1.5, "type"),
        ("lines_added", True, "type"),
        ("lines_added", "3", "type"),
        ("file_path", "", "min_length"),
        ("file_path", None, "type"),
    ],
)
def test_type_and_length_errors(field: str, value: Any, code: str) -> None:
    data = sample("file_update")
    data[field] = value
    assert [(e.path, e.code) for e in validate(Kind.FILE_UPDATE, data).errors] == [(field, code)]


def test_whitespace_only_string_passes_schema_but_fails_invariant() -> None:
    data = sample("git")
    data["repo_url"] = "   "
    assert [(e.path, e.code) for e in validate(Kind.GIT, data).errors] == [
        ("repo_url", "invariant_non_empty_string")
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("author_email", "not-an-address"),
        ("author_email", "a@b"),
        ("author_email", "two@@example.org"),
    ],
)
def test_email_format(field: str, value: str) -> None:
    data = sample("git")
    data[field] = value
    assert [(e.path, e.code) for e in validate(Kind.GIT, data).errors] == [(field, "format")]


@pytest.mark.parametrize(
    "value", ["not a uri", "/relative/path", "https://exa mple.org", "http://x/%zz"]
)
def test_uri_format(value: str) -> None:
    data = sample("ci")
    data["run_url"] = value
    assert [(e.path, e.code) for e in validate(Kind.CI, data).errors] == [("run_url", "format")]


@pytest.mark.parametrize("family", list(FamilyForm))
@pytest.mark.parametrize("kind", PAYLOAD_KINDS, ids=str)
def test_envelope_accepts_both_family_spellings(kind: Kind, family: FamilyForm) -> None:
    envelope = build_envelope(kind, sample(kind.value), source_module="test", family=family)
    assert validate(Kind.ENVELOPE, envelope).ok
    assert detect_kind(envelope) is Kind.ENVELOPE


def test_envelope_payload_is_checked_against_its_event_type() -> None:
    envelope = build_envelope(Kind.FILE_UPDATE, sample("git"), source_module="test")
    result = validate(Kind.ENVELOPE, envelope)
    assert ("payload.file_path", "required") in [(e.path, e.code) for e in result.errors]
    assert ("payload.repo_url", "extra_forbidden") in [(e.path, e.code) for e in result.errors]


def test_envelope_payload_invariants_are_prefixed() -> None:
    payload = sample("tool")
    payload["tool_id"] = " "
    result = validate(Kind.ENVELOPE, build_envelope(Kind.TOOL, payload, source_module="test"))
    assert [(e.path, e.code) for e in result.errors] == [
        ("payload.tool_id", "invariant_non_empty_string")
    ]


@pytest.mark.parametrize(
    ("change", "code", "path"),
    [
        ({"event_family": "pipeline_stage"}, "enum", "event_family"),
        ({"event_type": "file_saved"}, "enum", "event_type"),
        ({"source": ""}, "min_length", "source"),
        ({"timestamp": "now"}, "format", "timestamp"),
        ({"extra": 1}, "extra_forbidden", "extra"),
    ],
)
def test_envelope_fields(change: dict[str, Any], code: str, path: str) -> None:
    envelope = build_envelope(Kind.CI, sample("ci"), source_module="test")
    envelope.update(change)
    assert (path, code) in [(e.path, e.code) for e in validate(Kind.ENVELOPE, envelope).errors]


@pytest.mark.parametrize(
    "name",
    ["event_id", "event_family", "event_type", "timestamp", "source_module", "source", "payload"],
)
def test_envelope_required(name: str) -> None:
    envelope = build_envelope(Kind.CI, sample("ci"), source_module="test")
    del envelope[name]
    assert (name, "required") in [
        (e.path, e.code) for e in validate(Kind.ENVELOPE, envelope).errors
    ]


def test_observability_event_family_conditions() -> None:
    event = sample("pipeline_stage")
    event["pipeline_id"] = NOT_V4["v7"]
    assert [(e.path, e.code) for e in validate(Kind.PIPELINE_STAGE, event).errors] == [
        ("pipeline_id", "invariant_uuid_v4")
    ]
    event = sample("graph_update")
    del event["node_delta"]
    assert [(e.path, e.code) for e in validate(Kind.GRAPH_UPDATE, event).errors] == [
        ("node_delta", "required")
    ]
    event = sample("runtime_execution")
    event["event_family"] = "graph_update"
    assert ("event_family", "const") in [
        (e.path, e.code) for e in validate(Kind.RUNTIME_EXECUTION, event).errors
    ]


@pytest.mark.parametrize("value", [None, 1, "text", [], [{}]])
def test_non_object_input(value: Any) -> None:
    result = validate(Kind.TOOL, value)
    assert [(e.path, e.code) for e in result.errors] == [("", "type")]


def test_detect_kind() -> None:
    for kind in ALL_KINDS:
        assert detect_kind(sample(kind.value)) is kind
    assert detect_kind({"status": "running"}) is None
    assert detect_kind({"event_family": "intent"}) is None
    assert detect_kind([1]) is None


def test_reference_examples_rejected_as_shipped_and_accepted_without_comment(
    reference: Path,
) -> None:
    examples = sorted((reference / "examples" / "integration").glob("*.json"))
    assert len(examples) == 4
    for path in examples:
        data = json.loads(path.read_text())
        kind = detect_kind({k: v for k, v in data.items() if k != "$comment"})
        assert kind is not None
        shipped = validate(kind, data)
        assert [(e.path, e.code) for e in shipped.errors] == [("$comment", "extra_forbidden")]
        data.pop("$comment")
        assert validate(kind, data).ok, path.name


def test_our_schemas_match_upstream_constraints(reference: Path) -> None:
    """Same fields, types, enums, required sets, patterns, formats and closedness."""

    def constraints(schema: Any) -> Any:
        if isinstance(schema, dict):
            keep = {
                "type",
                "enum",
                "required",
                "pattern",
                "format",
                "additionalProperties",
                "minLength",
                "minimum",
                "const",
            }
            out = {k: v for k, v in schema.items() if k in keep}
            if "properties" in schema:
                out["properties"] = {k: constraints(v) for k, v in schema["properties"].items()}
            if "items" in schema:
                out["items"] = constraints(schema["items"])
            if "required" in out:
                out["required"] = sorted(out["required"])
            if "allOf" in schema:
                out["allOf"] = [constraints(s) for s in schema["allOf"]]
            return out
        return schema

    upstream = reference / "schemas" / "v2"
    for kind in [*PAYLOAD_KINDS, Kind.PIPELINE_STAGE, Kind.GRAPH_UPDATE, Kind.RUNTIME_EXECUTION]:
        relative = SPECS[kind].schema.removeprefix("v2/")
        ours = load_json(SPECS[kind].schema)
        theirs = json.loads((upstream / relative).read_text())
        assert constraints(ours) == constraints(theirs), relative
    core = load_json("v2/events/mplp-event-core.schema.json")
    assert constraints(core) == constraints(
        json.loads((upstream / "events/mplp-event-core.schema.json").read_text())
    )


def test_validator_is_compiled_once() -> None:
    assert default_validator() is default_validator()

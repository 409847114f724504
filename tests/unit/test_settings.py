"""Settings: the schema is the one description, the model mirrors it, values are checked
against the schema itself, loading never fails."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import Any, Literal, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from mplp_lsp.config.settings import (
    Settings,
    SettingsError,
    ToolTask,
    parse_settings,
    setting_name,
    settings_schema,
)
from tests.conftest import REPO
from tests.support.properties import examples

SCHEMA = settings_schema()
PROPERTIES: dict[str, dict[str, Any]] = SCHEMA["properties"]
WIRE_DEFAULTS = {name: prop["default"] for name, prop in PROPERTIES.items()}


def wire(value: Settings) -> dict[str, Any]:
    return value.to_wire()


# The schema file itself


def test_schema_is_a_valid_draft7_schema() -> None:
    Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert SCHEMA["type"] == "object"
    assert SCHEMA["additionalProperties"] is False


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_every_property_is_fully_described(name: str) -> None:
    prop = PROPERTIES[name]
    assert {"type", "default", "description"} <= prop.keys()
    assert prop["description"].strip()
    assert Draft7Validator(prop).is_valid(prop["default"])
    if "enum" in prop:
        assert len(prop["enumDescriptions"]) == len(prop["enum"])


def test_settings_schema_returns_a_fresh_copy() -> None:
    first = settings_schema()
    first["properties"].clear()
    assert settings_schema()["properties"].keys() == PROPERTIES.keys()


def test_defaults_validate_against_the_schema() -> None:
    assert Draft7Validator(SCHEMA).is_valid(WIRE_DEFAULTS)


# Schema and model never diverge


_JSON_TYPES: dict[Any, str] = {int: "integer", bool: "boolean", str: "string", type(None): "null"}


def _json_types(annotation: Any) -> set[str]:
    """The JSON types a field's annotation holds (its Literal's values' types for an enum)."""
    if get_origin(annotation) is Literal:
        return {_JSON_TYPES[type(choice)] for choice in get_args(annotation)}
    if get_origin(annotation) in (types.UnionType, typing.Union):
        return set().union(*(_json_types(arm) for arm in get_args(annotation)))
    if get_origin(annotation) is tuple:
        return {"object"} if get_args(annotation)[0] == tuple[str, ToolTask] else {"array"}
    return {_JSON_TYPES[annotation]}


def test_model_has_the_schema_properties_and_defaults() -> None:
    assert set(Settings().to_wire()) == set(PROPERTIES)
    assert wire(Settings()) == WIRE_DEFAULTS


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_model_has_the_schema_types_and_enums(name: str) -> None:
    attribute = setting_name(name)
    assert attribute is not None
    annotation = typing.get_type_hints(Settings)[attribute]
    prop = PROPERTIES[name]
    kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
    assert _json_types(annotation) == set(kinds)
    if "enum" in prop:
        assert list(get_args(annotation)) == prop["enum"]


def test_checking_refuses_with_each_key_and_reason() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.checked({"debounce_ms": -1, "log_level": "loud", "api_port": 8080})
    assert [p.name for p in refused.value.problems] == ["debounce_ms", "log_level"]
    assert "debounceMs: input should be greater than or equal to 0" in str(refused.value)
    assert Settings.checked({"api_port": 8080.0}).api_port == 8080


def test_wire_names_are_the_camel_case_of_the_attributes() -> None:
    for field in dataclasses.fields(Settings):
        head, *rest = field.name.split("_")
        assert Settings().to_wire({field.name}).keys() == {
            head + "".join(part.capitalize() for part in rest)
        }


# Loading


def test_none_gives_defaults_without_warnings() -> None:
    assert parse_settings(None) == (Settings(), [])
    assert parse_settings({}) == (Settings(), [])
    assert parse_settings([]) == (Settings(), [])


def test_a_full_valid_object_is_taken_as_is() -> None:
    raw = {
        "debounceMs": 250,
        "maxWaitMs": 0,
        "exclude": ["node_modules/", "*.log"],
        "sendWorkspaceRoot": True,
        "eventFamily": "upstream",
        "logLevel": "debug",
        "stateDir": "~/state",
        "apiPort": 65535,
        "gitPollMs": 250,
        "gitAuthorEmail": "keep",
        "remoteUrl": "https://runtime.example/mplp",
        "remoteTokenFile": "~/.config/mplp/token",
        "remoteAllowInsecureHttp": True,
        "forwardBatchSize": 100,
        "forwardBatchBytes": 65536,
        "forwardLingerMs": 0,
        "forwardRetryInitialMs": 10,
        "forwardRetryMaxMs": 1000,
        "forwardDiskBudgetMb": 5,
        "forwardReportS": 5,
        "otlpEndpoint": "http://127.0.0.1:4318",
        "otlpTokenFile": "~/.config/mplp/otlp-token",
        "otlpEncoding": "protobuf",
        "otlpCompression": "none",
        "otlpSendHostName": True,
        "remotes": [
            {
                "kind": "otlp",
                "url": "https://otel.example:4318",
                "name": "vendor",
                "tokenEnv": "VENDOR_TOKEN",
                "options": {"encoding": "json", "sendHostName": False},
            },
            {"kind": "collector", "url": "https://team.example/mplp", "tokenFile": "~/t"},
        ],
        "driftInterval": 0,
        "driftSeverity": "hint",
        "snapshotMaxBytes": 0,
        "retentionDays": 30,
        "storeMaxMb": 100,
        "apiEnabled": False,
        "tools": {"lint": {"command": ["ruff", "check", "."], "kind": "linter", "cwd": "src"}},
        "vslUrl": "file:///var/mplp/values",
        "llmEndpointUrl": "http://127.0.0.1:8000/v1",
        "llmModel": "local-model",
        "llmApiKeyFile": "~/.config/mplp/llm-key",
        "allowWorkspaceSensitiveSettings": True,
    }
    loaded, warnings = parse_settings(raw)
    assert warnings == []
    assert wire(loaded) == raw
    assert loaded.exclude == ("node_modules/", "*.log")
    assert (loaded.debounce_ms, loaded.send_workspace_root, loaded.state_dir) == (
        250,
        True,
        "~/state",
    )


def test_section_wrapper_dotted_and_snake_case_keys() -> None:
    wrapped, w1 = parse_settings({"mplp": {"debounceMs": 10}, "python": {"x": 1}})
    dotted, w2 = parse_settings({"mplp.debounceMs": 10})
    snake, w3 = parse_settings({"debounce_ms": 10})
    assert wrapped.debounce_ms == dotted.debounce_ms == snake.debounce_ms == 10
    assert w1 == w2 == w3 == []


def test_integral_floats_are_integers_but_booleans_and_strings_are_not() -> None:
    assert parse_settings({"debounceMs": 100.0})[0].debounce_ms == 100
    for bad in (True, "100", 100.5, None):
        loaded, warnings = parse_settings({"debounceMs": bad})
        assert loaded.debounce_ms == 500
        assert len(warnings) == 1 and warnings[0].startswith("debounceMs: ")


@pytest.mark.parametrize(
    ("raw", "key", "reason"),
    [
        ({"debounceMs": -1}, "debounceMs", "greater than or equal to 0"),
        ({"maxWaitMs": 10**9}, "maxWaitMs", "less than or equal to 600000"),
        ({"apiPort": 70000}, "apiPort", "less than or equal to 65535"),
        ({"exclude": "node_modules/"}, "exclude", "valid list"),
        ({"exclude": ["a", 3]}, "exclude", "item 1: input should be a valid string"),
        ({"sendWorkspaceRoot": "yes"}, "sendWorkspaceRoot", "valid boolean"),
        ({"eventFamily": "ExternalIntegrationEvent"}, "eventFamily", "'spec' or 'upstream'"),
        ({"logLevel": "WARNING"}, "logLevel", "'error', 'warning', 'info' or 'debug'"),
        ({"stateDir": ""}, "stateDir", "at least 1 character"),
        ({"stateDir": 5}, "stateDir", "valid string"),
    ],
)
def test_an_invalid_value_names_key_and_reason_and_falls_back(
    raw: dict[str, Any], key: str, reason: str
) -> None:
    loaded, warnings = parse_settings({**raw, "debounceMs": raw.get("debounceMs", 42)})
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{key}: ")
    assert reason in warnings[0]
    assert f"using the default {json.dumps(WIRE_DEFAULTS[key])}" in warnings[0]
    assert wire(loaded)[key] == WIRE_DEFAULTS[key]
    if key != "debounceMs":
        assert loaded.debounce_ms == 42  # the other keys keep their values


def test_unknown_keys_are_reported() -> None:
    loaded, warnings = parse_settings({"debounceMS": 5, "maxWaitMs": 7, "mplp.nope": 1})
    assert loaded.max_wait_ms == 7 and loaded.debounce_ms == 500
    assert warnings == ['unknown setting "debounceMS" ignored', 'unknown setting "nope" ignored']


def test_long_values_are_shortened_in_warnings() -> None:
    [warning] = parse_settings({"stateDir": ["x" * 500]})[1]
    assert len(warning) < 200


@pytest.mark.parametrize("raw", [5, "debounceMs=5", True, 1.5, b"{}"])
def test_not_an_object_or_list_gives_defaults_and_a_warning(raw: Any) -> None:
    loaded, warnings = parse_settings(raw)
    assert loaded == Settings()
    assert len(warnings) == 1 and warnings[0].startswith("settings must be an object or a list")


def test_list_entries_that_are_not_objects_are_skipped_with_a_warning() -> None:
    loaded, warnings = parse_settings([{"debounceMs": 9}, 3, None, "x"])
    assert loaded.debounce_ms == 9
    assert warnings == [
        "settings entry 1 is a number, not an object; ignored",
        "settings entry 3 is a string, not an object; ignored",
    ]


# Several workspace folders

FOLDERS = [
    {"debounceMs": 1, "logLevel": "info"},
    {"scopeUri": "file:///home/u/a", "debounceMs": 2, "apiPort": 2},
    {"folder": "file:///home/u/a/b/", "mplp": {"debounceMs": 3}},
    {"scopeUri": "file:///home/u/ab", "debounceMs": 4, "maxWaitMs": 4},
]


@pytest.mark.parametrize(
    ("folder_uri", "expected"),
    [
        ("file:///home/u/a/b", {"debounceMs": 3, "apiPort": 2, "logLevel": "info"}),
        ("file:///home/u/a/b/c", {"debounceMs": 3, "apiPort": 2, "logLevel": "info"}),
        ("file:///home/u/a", {"debounceMs": 2, "apiPort": 2, "logLevel": "info"}),
        ("file:///home/u/a/bc", {"debounceMs": 2, "apiPort": 2, "logLevel": "info"}),
        ("file:///home/u/ab", {"debounceMs": 4, "maxWaitMs": 4, "logLevel": "info"}),
        ("file:///elsewhere", {"debounceMs": 1, "logLevel": "info"}),
        (None, {"debounceMs": 1, "logLevel": "info"}),
    ],
)
def test_the_most_specific_folder_wins_key_by_key(
    folder_uri: str | None, expected: dict[str, Any]
) -> None:
    loaded, warnings = parse_settings(FOLDERS, folder_uri=folder_uri)
    assert warnings == []
    assert wire(loaded) == {**WIRE_DEFAULTS, **expected}


def test_folder_uris_compare_after_percent_decoding() -> None:
    raw = [{"scopeUri": "file:///c%3A/projects", "debounceMs": 7}]
    assert parse_settings(raw, folder_uri="file:///c:/projects/app")[0].debounce_ms == 7


def test_equally_specific_entries_later_wins() -> None:
    init_options = {"debounceMs": 1, "apiPort": 8080}
    pulled = {"debounceMs": 2}
    loaded, _ = parse_settings([init_options, pulled], folder_uri="file:///w")
    assert (loaded.debounce_ms, loaded.api_port) == (2, 8080)


def test_an_invalid_folder_is_reported() -> None:
    loaded, warnings = parse_settings([{"scopeUri": 3, "debounceMs": 5}], folder_uri="file:///w")
    assert loaded.debounce_ms == 500
    assert warnings == ["settings entry 0: the folder is a number; ignored"]


def test_settings_are_frozen_and_hashable() -> None:
    loaded = parse_settings({"exclude": ["a"]})[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.debounce_ms = 1  # type: ignore[misc]  # the write this test shows is refused
    assert hash(loaded) == hash(parse_settings({"exclude": ["a"]})[0])


# Properties

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["spec", "upstream", "debug", "error", "", "node_modules/"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
keys = st.sampled_from([*PROPERTIES, "mplp", "mplp.debounceMs", "scopeUri", "folder"]) | st.text(
    max_size=10
)
objects = st.dictionaries(keys, json_values, max_size=8)
anything = (
    json_values
    | objects
    | st.lists(objects | json_values, max_size=4)
    | st.builds(object)
    | st.binary(max_size=4)
    | st.sets(st.integers(), max_size=3)
    | st.dictionaries(st.integers() | st.tuples(st.integers()), json_values, max_size=3)
)


@settings(max_examples=examples(300), deadline=None)
@given(raw=anything, folder_uri=st.none() | st.text(max_size=12) | st.just("file:///w"))
def test_never_raises_and_always_yields_schema_valid_settings(
    raw: Any, folder_uri: str | None
) -> None:
    loaded, warnings = parse_settings(raw, folder_uri=folder_uri)
    assert isinstance(loaded, Settings)
    assert all(isinstance(w, str) and w for w in warnings)
    assert Draft7Validator(SCHEMA).is_valid(wire(loaded))


def _same(loaded_value: Any, given_value: Any) -> bool:
    if isinstance(given_value, list):
        return list(loaded_value) == given_value
    if isinstance(given_value, float) and not math.isfinite(given_value):
        return False
    return bool(loaded_value == given_value)


@settings(max_examples=examples(300), deadline=None)
@given(raw=st.dictionaries(st.sampled_from(sorted(PROPERTIES)), json_values, min_size=1))
def test_each_key_is_accepted_exactly_when_the_schema_accepts_it(raw: dict[str, Any]) -> None:
    loaded, warnings = parse_settings(raw)
    values = wire(loaded)
    for key, value in raw.items():
        if Draft7Validator(PROPERTIES[key]).is_valid(value):
            assert _same(values[key], value), key
            assert not any(w.startswith(f"{key}: ") for w in warnings)
        else:
            assert values[key] == WIRE_DEFAULTS[key], key
            assert any(w.startswith(f"{key}: ") for w in warnings), key


# Docs


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_docs_have_a_table_row_with_the_default(name: str) -> None:
    docs = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = [line for line in docs.splitlines() if line.startswith(f"| `{name}` |")]
    assert len(rows) == 1, f"docs/settings.md needs one table row for {name}"
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[2] == f"`{json.dumps(PROPERTIES[name]['default'])}`"

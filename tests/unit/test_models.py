"""Typed models round-trip to exactly the JSON that validates, and follow the schemas."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import BaseModel, ValidationError

from mplp_lsp.protocol.envelope import FamilyForm, build_envelope, utc_timestamp
from mplp_lsp.protocol.kinds import PAYLOAD_KINDS, SPECS, Kind
from mplp_lsp.protocol.models import (
    PAYLOAD_MODELS,
    CiStage,
    ExternalIntegrationEvent,
    FileUpdateEvent,
)
from mplp_lsp.protocol.schemas import load_json
from mplp_lsp.protocol.validator import validate
from tests.conftest import sample
from tests.unit.test_validation_properties import mutated


@pytest.mark.parametrize("kind", PAYLOAD_KINDS, ids=str)
def test_fixture_round_trips(kind: Kind) -> None:
    data = sample(kind.value)
    assert PAYLOAD_MODELS[kind].model_validate(data).to_json() == data


def test_reference_examples_round_trip(reference: Path) -> None:
    for path in sorted((reference / "examples" / "integration").glob("*.json")):
        data = json.loads(path.read_text())
        data.pop("$comment")
        kind = next(k for k in PAYLOAD_KINDS if validate(k, data).ok)
        assert PAYLOAD_MODELS[kind].model_validate(data).to_json() == data


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mutated())
def test_whatever_validates_round_trips(case: tuple[Kind, Any]) -> None:
    kind, data = case
    if kind not in PAYLOAD_KINDS and kind is not Kind.ENVELOPE:
        return
    if not validate(kind, data).ok:
        return
    model = ExternalIntegrationEvent if kind is Kind.ENVELOPE else PAYLOAD_MODELS[kind]
    assert model.model_validate(data).to_json() == data


def literal_values(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    [literal] = [a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal]
    return list(typing.get_args(literal))


@pytest.mark.parametrize("kind", PAYLOAD_KINDS, ids=str)
def test_models_follow_the_schema(kind: Kind) -> None:
    schema = load_json(SPECS[kind].schema)
    model = PAYLOAD_MODELS[kind]
    assert set(model.model_fields) == set(schema["properties"])
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required == set(schema["required"])
    for name, prop in schema["properties"].items():
        if "enum" in prop:
            assert literal_values(model.model_fields[name].annotation) == prop["enum"], name


def test_ci_stage_model_follows_the_schema() -> None:
    stage_schema = load_json(SPECS[Kind.CI].schema)["properties"]["stages"]["items"]
    assert set(CiStage.model_fields) == set(stage_schema["properties"])
    assert (
        literal_values(CiStage.model_fields["status"].annotation)
        == stage_schema["properties"]["status"]["enum"]
    )


def test_integral_float_is_an_integer_like_in_json_schema() -> None:
    data = sample("file_update") | {"lines_added": 3.0}
    assert validate(Kind.FILE_UPDATE, data).ok
    assert FileUpdateEvent.model_validate(data).lines_added == 3


@pytest.mark.parametrize(
    "change",
    [
        {"lines_added": 1.5},
        {"lines_added": True},
        {"timestamp": "yesterday"},
        {"extra": 1},
        {"change_type": "moved"},
    ],
)
def test_model_refuses_what_the_schema_refuses(change: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        FileUpdateEvent.model_validate(sample("file_update") | change)


def test_envelope_model_picks_payload_model_by_event_type() -> None:
    envelope = build_envelope(
        Kind.GIT, sample("git"), source_module="git", family=FamilyForm.UPSTREAM
    )
    model = ExternalIntegrationEvent.model_validate(envelope)
    assert type(model.payload).__name__ == "GitEvent"
    assert model.to_json() == envelope


def test_built_envelope_shape() -> None:
    envelope = build_envelope(Kind.FILE_UPDATE, sample("file_update"), source_module="ide")
    assert envelope["event_family"] == "ExternalIntegrationEvent"
    assert envelope["event_type"] == "file_update"
    assert envelope["source"].startswith("mplp-lsp/")
    assert validate(Kind.ENVELOPE, envelope).ok
    types = {
        k: build_envelope(k, sample(k.value), source_module="x")["event_type"]
        for k in PAYLOAD_KINDS
    }
    assert types == {
        Kind.TOOL: "tool_execution",
        Kind.FILE_UPDATE: "file_update",
        Kind.GIT: "git_operation",
        Kind.CI: "ci_pipeline",
    }


def test_utc_timestamp_has_milliseconds_and_z() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    moment = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
    assert utc_timestamp(moment) == "2025-01-02T01:04:05.678Z"
    assert utc_timestamp().endswith("Z") and len(utc_timestamp()) == 24
    assert utc_timestamp(datetime(2025, 1, 1, tzinfo=UTC)) == "2025-01-01T00:00:00.000Z"


def test_models_are_pydantic() -> None:
    assert all(issubclass(m, BaseModel) for m in PAYLOAD_MODELS.values())

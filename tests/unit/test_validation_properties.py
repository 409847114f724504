"""Property tests: validate() is total, and the fast path agrees with the oracle."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mplp_lsp.cli.validate import check_text
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.protocol.validator import default_validator, validate
from tests.conftest import sample
from tests.support.properties import examples

V4 = "3f1c2a4e-8b7d-4c2e-9a1f-0d5e6b7c8a90"
TRICKY_STRINGS = [
    "",
    " ",
    V4,
    V4.upper(),
    V4 + "\n",
    "3f1c2a4e-8b7d-1c2e-9a1f-0d5e6b7c8a90",
    "2025-01-01T00:00:00Z",
    "2025-01-01T00:00:00.123+05:30",
    "2025-02-29T00:00:00Z",
    "2025-01-01T00:00:00Z\n",
    "2025-01-01 00:00:00Z",
    "dev@example.org",
    "dev@localhost",
    "https://ci.example.org/run/1",
    "not a uri",
    "created",
    "succeeded",
    "Succeeded",
    "linter",
    "file_update",
    "ExternalIntegrationEvent",
    "external_integration",
    "pipeline_stage",
    "\x00",
    "\ud800",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(TRICKY_STRINGS),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)
KINDS = list(Kind)
PERTURBATIONS: list[Callable[[str], str]] = [
    lambda s: s + "\n",
    str.upper,
    lambda s: s[:-1],
    lambda s: " " + s,
    lambda s: s + "x",
    lambda s: s.replace("-", ""),
    lambda s: s.replace("Z", ""),
    lambda s: s.replace("T", " "),
    lambda s: "",
]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Kind, Any]:
    """A valid object of some kind with a few random edits: near the boundary of validity."""
    kind = draw(st.sampled_from(KINDS))
    if kind is Kind.ENVELOPE:
        payload_kind = draw(st.sampled_from([Kind.TOOL, Kind.FILE_UPDATE, Kind.GIT, Kind.CI]))
        from mplp_lsp.protocol.envelope import build_envelope

        data: Any = build_envelope(
            payload_kind, sample(payload_kind.value), source_module="test", event_id=V4
        )
    else:
        data = sample(kind.value)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        target = data
        if isinstance(target.get("payload"), dict) and draw(st.booleans()):
            target = target["payload"]
        keys = sorted(target)
        action = draw(st.sampled_from(["perturb", "perturb", "set", "delete", "add"]))
        if action == "perturb" and keys:
            key = draw(st.sampled_from(keys))
            if isinstance(target[key], str):
                target[key] = draw(st.sampled_from(PERTURBATIONS))(target[key])
            else:
                target[key] = draw(st.sampled_from(TRICKY_STRINGS))
        elif action == "set" and keys:
            target[draw(st.sampled_from(keys))] = draw(json_values)
        elif action == "delete" and keys:
            del target[draw(st.sampled_from(keys))]
        else:
            target[draw(st.text(max_size=10))] = draw(json_values)
    return kind, data


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(KINDS), json_values)
def test_validate_is_total_on_arbitrary_json(kind: Kind, data: Any) -> None:
    result = validate(kind, data)
    assert isinstance(result, ValidationResult)
    assert result.ok == (not result.errors)
    json.dumps(result.to_dict())  # always serialisable for the CLI and HTTP


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.text(max_size=200) | json_values.map(json.dumps))
def test_cli_checker_is_total_on_arbitrary_text(text: str) -> None:
    for checked in check_text("input", text):
        assert isinstance(checked.result, ValidationResult)


@settings(max_examples=examples(1500), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mutated())
def test_fast_path_and_oracle_agree_near_valid_inputs(case: tuple[Kind, Any]) -> None:
    kind, data = case
    validator = default_validator()
    fast = validator.fast_accepts(kind, data)
    assume(fast is not None)
    assert fast == (validator.oracle_issues(kind, data) == []), data


@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(KINDS), json_values)
def test_fast_path_and_oracle_agree_on_arbitrary_json(kind: Kind, data: Any) -> None:
    validator = default_validator()
    fast = validator.fast_accepts(kind, data)
    assume(fast is not None)
    assert fast == (validator.oracle_issues(kind, data) == [])


def _string_locations(obj: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    )
    for key, value in items:
        if isinstance(value, str):
            found.append((*here, key))
        found.extend(_string_locations(value, (*here, key)))
    return found


def test_fast_path_and_oracle_agree_on_every_string_boundary() -> None:
    """Exhaustive sweep: each string field of each kind, bent every way we know."""
    from mplp_lsp.protocol.envelope import build_envelope

    validator = default_validator()
    subjects: list[tuple[Kind, Any]] = [
        (k, sample(k.value)) for k in KINDS if k is not Kind.ENVELOPE
    ]
    subjects += [
        (Kind.ENVELOPE, build_envelope(k, sample(k.value), source_module="test", event_id=V4))
        for k in (Kind.TOOL, Kind.FILE_UPDATE, Kind.GIT, Kind.CI)
    ]
    checked = 0
    for kind, subject in subjects:
        for location in _string_locations(subject):
            original = subject
            for part in location[:-1]:
                original = original[part]
            value = original[location[-1]]
            for replacement in [p(value) for p in PERTURBATIONS] + TRICKY_STRINGS:
                original[location[-1]] = replacement
                fast = validator.fast_accepts(kind, subject)
                if fast is not None:
                    assert fast == (validator.oracle_issues(kind, subject) == []), (
                        kind,
                        location,
                        replacement,
                    )
                    checked += 1
            original[location[-1]] = value
    assert checked > 2000

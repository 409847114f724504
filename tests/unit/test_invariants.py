"""The invariants engine and every invariant in the project's invariant files."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.protocol.invariants import (
    MISSING,
    Invariant,
    InvariantLoadError,
    InvariantSet,
    locate,
    parse_path,
    parse_rule,
)
from mplp_lsp.protocol.schemas import schema_root
from tests.conftest import sample
from tests.support.properties import examples

INVARIANT_FILES = sorted((schema_root() / "v2" / "invariants").glob("*.yaml"))
CONTEXT_ID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
PLAN_ID = "1b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e"
STEP_ID = "2c3d4e5f-6a7b-4c8d-ae9f-1a2b3c4d5e6f"


def sa_objects() -> dict[str, dict[str, Any]]:
    context = {"context_id": CONTEXT_ID, "status": "active", "title": "demo"}
    plan = {
        "plan_id": PLAN_ID,
        "context_id": CONTEXT_ID,
        "steps": [
            {"step_id": STEP_ID, "description": "do it", "status": "pending", "agent_role": "coder"}
        ],
    }
    trace = {
        "trace_id": STEP_ID,
        "context_id": CONTEXT_ID,
        "plan_id": PLAN_ID,
        "events": [{"event_type": "plan.created"}],
    }
    return {"context": context, "plan": plan, "trace": trace}


def subject_for(invariant: Invariant) -> dict[str, Any]:
    """A valid object in the invariant's scope that the invariant applies to."""
    by_scope = {
        "tool_event": "tool",
        "file_update_event": "file_update",
        "git_event": "git",
        "ci_event": "ci",
    }
    if invariant.scope in by_scope:
        return sample(by_scope[invariant.scope])
    if invariant.scope == "event":
        family = invariant.when.get("event_family", "graph_update")
        return sample(family)
    return sa_objects()[invariant.scope]


def breaking_value(invariant: Invariant, current: Any) -> Any:
    text = invariant.rule.text
    if text == "non-empty-string":
        return "   "
    if text.startswith("enum("):
        return "not-a-member"
    if text == "uuid-v4":
        return str(current).upper() if isinstance(current, str) else "x"
    if text == "iso-datetime":
        return "2025-13-01T00:00:00Z"
    if text.startswith("min-length("):
        return []
    if text.startswith("eq("):
        return "9f9f9f9f-9f9f-4f9f-9f9f-9f9f9f9f9f9f"
    raise AssertionError(f"no breaking value for rule {text}")


def set_first(obj: Any, invariant: Invariant, value: Any) -> None:
    where, _ = next(locate(obj, invariant.parts))
    for part in where[:-1]:
        obj = obj[part]
    obj[where[-1]] = value


INVARIANTS = [
    (path, invariant)
    for path in INVARIANT_FILES
    for invariant in InvariantSet.load(path).invariants
]
CASES = [pytest.param(path, invariant, id=invariant.id) for path, invariant in INVARIANTS]
WHEN_PRESENT = [
    case for case, (_, invariant) in zip(CASES, INVARIANTS, strict=True) if invariant.when_present
]


def test_every_invariant_file_is_covered() -> None:
    names = {p.name for p in INVARIANT_FILES}
    assert names == {
        "integration-invariants.yaml",
        "observability-invariants.yaml",
        "sa-invariants.yaml",
    }
    assert len(CASES) == 19 + 12 + 9


@pytest.mark.parametrize(("path", "invariant"), CASES)
def test_invariant_passes_and_fails(path: Path, invariant: Invariant) -> None:
    invariants = InvariantSet.load(path)
    env = sa_objects()
    subject = subject_for(invariant)
    env[invariant.scope] = subject
    passing = [
        i for i in invariants.check(invariant.scope, subject, env) if invariant.id in i.message
    ]
    assert passing == []

    broken = copy.deepcopy(subject)
    _, current = next(locate(broken, invariant.parts))
    set_first(broken, invariant, breaking_value(invariant, current))
    env[invariant.scope] = broken
    failures = [
        i for i in invariants.check(invariant.scope, broken, env) if invariant.id in i.message
    ]
    assert [f.code for f in failures] == [str(invariant.rule.code)]


@pytest.mark.parametrize(("path", "invariant"), WHEN_PRESENT)
def test_when_present_rules_skip_absent_fields(path: Path, invariant: Invariant) -> None:
    subject = subject_for(invariant)
    where, _ = next(locate(subject, invariant.parts))
    container: Any = subject
    for part in where[:-1]:
        container = container[part]
    container.pop(where[-1], None)
    assert InvariantSet.load(path).check(invariant.scope, subject, sa_objects()) == []


def test_required_style_rule_fails_on_missing_field() -> None:
    invariants = InvariantSet.load(schema_root() / "v2/invariants/integration-invariants.yaml")
    payload = sample("git")
    del payload["commit_id"]
    issues = invariants.check("git_event", payload)
    assert [(i.path, i.code) for i in issues] == [("commit_id", "invariant_non_empty_string")]


def test_family_condition_limits_rules() -> None:
    invariants = InvariantSet.load(schema_root() / "v2/invariants/observability-invariants.yaml")
    event = sample("graph_update")
    # a graph_update without pipeline fields is fine: the pipeline rules do not apply
    assert invariants.check("event", event) == []
    event["event_family"] = "pipeline_stage"
    codes = sorted(i.path for i in invariants.check("event", event))
    assert codes == ["pipeline_id", "stage_id", "stage_status"]


# --- engine semantics --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        ("non-empty-string", "x", ["", " \t", 3, None, MISSING]),
        ("enum(a,b)", "b", ["c", "A", 1, ["a"], MISSING]),
        ("uuid-v4", STEP_ID, [STEP_ID.upper(), "", 5, MISSING]),
        ("iso-datetime", "2025-01-01T00:00:00Z", ["2025-01-01", 0, MISSING]),
        ("min-length(2)", [1, 2], [[1], "a", 5, MISSING]),
        ("exists", None, [MISSING]),
        ("positive-integer", 1, [0, -1, 1.5, True, "1", MISSING]),
        ("optional-string", MISSING, [1, None, []]),
        ('one-of(["approved", "rejected"])', "rejected", ["pending", MISSING]),
        ('eq("1.0.0")', "1.0.0", ["1.0", MISSING]),
    ],
)
def test_rule_semantics(rule: str, good: Any, bad: list[Any]) -> None:
    parsed = parse_rule(rule)
    assert parsed.check(good, {}) is None
    for value in bad:
        assert parsed.check(value, {}) is not None, value


def test_optional_string_accepts_a_string() -> None:
    assert parse_rule("optional-string").check("x", {}) is None


def test_eq_reference_compares_with_another_scope() -> None:
    rule = parse_rule("eq(context.context_id)")
    assert rule.check(CONTEXT_ID, {"context": {"context_id": CONTEXT_ID}}) is None
    assert rule.check(PLAN_ID, {"context": {"context_id": CONTEXT_ID}}) is not None
    assert "not available" in str(rule.check(CONTEXT_ID, {}))
    assert "missing" in str(rule.check(CONTEXT_ID, {"context": {}}))


def test_if_rule_applies_inner_rule_only_when_condition_holds() -> None:
    invariant_set = InvariantSet(
        [
            _invariant(
                "reason_if_rejected",
                "confirm",
                "reason",
                'if(status == "rejected", non-empty-string)',
            )
        ]
    )
    assert invariant_set.check("confirm", {"status": "approved"}) == []
    issues = invariant_set.check("confirm", {"status": "rejected"})
    assert [(i.path, i.code) for i in issues] == [("reason", "invariant_non_empty_string")]
    assert invariant_set.check("confirm", {"status": "rejected", "reason": "no"}) == []


def _invariant(id_: str, scope: str, path: str, rule: str, **extra: Any) -> Invariant:
    return Invariant(
        id=id_, scope=scope, path=path, rule=parse_rule(rule), parts=parse_path(path), **extra
    )


def test_wildcards_and_indexes() -> None:
    doc = {"steps": [{"id": "a"}, {"id": ""}, {}]}
    assert [(w, v) for w, v in locate(doc, parse_path("steps[*].id"))] == [
        (("steps", 0, "id"), "a"),
        (("steps", 1, "id"), ""),
        (("steps", 2, "id"), MISSING),
    ]
    assert list(locate(doc, parse_path("steps[1].id"))) == [(("steps", 1, "id"), "")]
    assert list(locate(doc, parse_path("steps[7].id"))) == [(("steps", 7), MISSING)]
    assert list(locate({"steps": []}, parse_path("steps[*].id"))) == []
    assert list(locate({}, parse_path("steps[*].id"))) == [(("steps",), MISSING)]
    assert list(locate({"steps": "x"}, parse_path("steps[*].id"))) == [(("steps",), MISSING)]


def test_wildcard_issue_paths_use_brackets() -> None:
    invariant_set = InvariantSet([_invariant("ids", "plan", "steps[*].step_id", "uuid-v4")])
    issues = invariant_set.check("plan", {"steps": [{"step_id": STEP_ID}, {"step_id": "nope"}]})
    assert [(i.path, i.code) for i in issues] == [("steps[1].step_id", "invariant_uuid_v4")]
    assert issues[0].message.startswith("[ids] steps[1].step_id")


@pytest.mark.parametrize(
    "rule",
    [
        "uuid-v5",
        "enum()",
        "enum(a,,b)",
        "min-length(x)",
        "eq(plan)",
        'one-of("a")',
        "if(status, exists)",
        "regex(.*)",
        "",
    ],
)
def test_unknown_or_malformed_rule_is_a_load_error(rule: str) -> None:
    with pytest.raises(InvariantLoadError):
        parse_rule(rule)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_unknown_rule_in_a_file_fails_the_load(tmp_path: Path) -> None:
    path = write(
        tmp_path, "x.yaml", "invariants:\n  - {id: a, scope: s, path: p, rule: is-awesome}\n"
    )
    with pytest.raises(InvariantLoadError, match="is-awesome"):
        InvariantSet.load(path)


def test_notes_in_upstream_phrasing_become_conditions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "x.yaml",
        "invariants:\n"
        "  - {id: a, scope: s, path: t, rule: iso-datetime, note: 'Apply only when t field exists'}\n"
        "  - {id: b, scope: s, path: r, rule: non-empty-string, note: 'optional; validate only when present'}\n"
        "  - {id: c, scope: s, path: g, rule: uuid-v4, note: 'Apply when event_family == graph_update'}\n",
    )
    a, b, c = InvariantSet.load(path).invariants
    assert a.when_present and b.when_present and not c.when_present
    assert dict(c.when) == {"event_family": "graph_update"}


def test_a_condition_note_the_engine_cannot_read_fails_the_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "x.yaml",
        "invariants:\n  - {id: a, scope: s, path: t, rule: exists, note: 'only if the moon is full'}\n",
    )
    with pytest.raises(InvariantLoadError, match="condition"):
        InvariantSet.load(path)


@pytest.mark.parametrize(
    "text",
    [
        "invariants: {a: 1}\n",
        "invariants:\n  - {id: a, path: p, rule: exists}\n",
        "invariants:\n  - {id: a, scope: s, path: 'a..b', rule: exists}\n",
        "invariants:\n  - {id: a, scope: s, path: p, rule: exists}\n  - {id: a, scope: s, path: q, rule: exists}\n",
        "invariants:\n  - just a string\n",
    ],
)
def test_malformed_files_fail_the_load(tmp_path: Path, text: str) -> None:
    with pytest.raises(InvariantLoadError):
        InvariantSet.load(write(tmp_path, "x.yaml", text))


def test_top_level_list_takes_scope_from_file_name(tmp_path: Path) -> None:
    path = write(tmp_path, "confirm.yaml", "- {id: a, path: confirm_id, rule: uuid-v4}\n")
    assert InvariantSet.load(path).scopes == frozenset({"confirm"})


def test_upstream_files_load_and_agree_with_ours(reference: Path) -> None:
    upstream_dir = reference / "schemas" / "v2" / "invariants"
    for ours_path in INVARIANT_FILES:
        ours = InvariantSet.load(ours_path)
        theirs = InvariantSet.load(upstream_dir / ours_path.name)
        assert [
            (i.id, i.scope, i.path, i.rule.text, i.when_present, dict(i.when))
            for i in ours.invariants
        ] == [
            (i.id, i.scope, i.path, i.rule.text, i.when_present, dict(i.when))
            for i in theirs.invariants
        ]


def test_golden_invariant_files_load(reference: Path) -> None:
    files = sorted((reference / "tests" / "golden").rglob("*.yaml"))
    assert files
    rules = {i.rule.text.split("(")[0] for f in files for i in InvariantSet.load(f).invariants}
    assert {"one-of", "if", "eq", "exists", "uuid-v4"} <= rules


# The quick test of valid input (the collector's cost per envelope) against the full check.

_LOADED = InvariantSet.load(*INVARIANT_FILES)
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from(
        [
            "",
            " ",
            "x",
            "modified",
            "created",
            "graph_update",
            "pipeline_stage",
            "external_integration",
            "2026-03-02T08:00:00.000Z",
            "2026-13-02T08:00:00Z",
            "0f6c9b1e-4d55-4c1b-9a5e-3b7f2c8d1e90",
            "0F6C9B1E-4D55-4C1B-9A5E-3B7F2C8D1E90",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutated(scope: str) -> st.SearchStrategy[Any]:
    """Valid objects of ``scope`` with some fields dropped or replaced, and non-objects."""
    bases = [subject_for(i) for i in _LOADED.for_scope(scope)]
    keys = sorted({key for base in bases for key in base} | {"event_family"})
    changes = st.dictionaries(st.sampled_from(keys), _VALUES | st.just(MISSING), max_size=4)

    def apply(base: dict[str, Any], change: dict[str, Any]) -> Any:
        out = copy.deepcopy(base)
        for key, value in change.items():
            if value is MISSING:
                out.pop(key, None)
            else:
                out[key] = value
        return out

    return st.builds(apply, st.sampled_from(bases), changes) | _VALUES


@pytest.mark.parametrize("scope", sorted(_LOADED.scopes))
@settings(max_examples=examples(150), deadline=None)
@given(data=st.data())
def test_the_quick_test_of_valid_input_agrees_with_the_full_check(
    scope: str, data: st.DataObject
) -> None:
    subject = data.draw(_mutated(scope))
    plan = _LOADED._plans[scope]
    issues = _LOADED.check(scope, subject, {"context": sa_objects()["context"]})
    if plan.passes(subject):
        # ``check`` returned early: what the full walk finds must be nothing either.
        everything = [
            issue
            for invariant in plan.applicable(subject)
            for issue in invariant.check(subject, {"$self": subject})
        ]
        assert everything == [] and issues == []
    elif plan.always_steps is not None:
        assert issues, "the quick test refused what the full check accepts"


def test_the_bundled_invariant_files_read_the_same_with_libyaml_as_with_pyyaml() -> None:
    # The files are read with libyaml's safe loader where PyYAML has it (ten times faster);
    # its parser is another implementation, so the bundled documents are held to be read alike.
    import yaml

    from mplp_lsp.protocol.invariants import _SAFE_LOADER

    files = sorted((schema_root() / "v2" / "invariants").glob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=_SAFE_LOADER) == yaml.safe_load(text), path.name

"""CI environment detection: each provider's variables become the right ci_event fields."""

from __future__ import annotations

import pytest

from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import default_validator
from mplp_lsp.sources.ci_env import PROVIDERS, ci_fields, detect, variables_table
from tests.support.ci_env import CASES


def test_every_provider_has_a_case() -> None:
    assert {provider.name for provider in PROVIDERS} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_provider_fields(name: str) -> None:
    env, expected = CASES[name]
    provider = detect(env)
    assert provider is not None and provider.name == name
    fields = ci_fields(env)
    assert fields == {"ci_provider": name, **expected}
    event = {**fields, "status": "succeeded"}
    assert default_validator().validate(Kind.CI, event).ok


def test_outside_ci_nothing_is_detected() -> None:
    assert detect({"HOME": "/home/u", "PATH": "/usr/bin"}) is None
    assert ci_fields({}) == {}


def test_a_partial_environment_gives_only_what_is_there() -> None:
    fields = ci_fields({"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "1"})
    assert fields == {"ci_provider": "github_actions", "run_id": "1"}


@pytest.mark.parametrize(
    ("event", "ref_type", "expected"),
    [
        ("pull_request_target", "branch", "pull_request"),
        ("workflow_dispatch", "branch", "manual"),
        ("push", "tag", "tag"),
        ("release", "branch", "other"),
    ],
)
def test_github_trigger_kinds(event: str, ref_type: str, expected: str) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event, "GITHUB_REF_TYPE": ref_type}
    assert ci_fields(env)["trigger_kind"] == expected


def test_the_docs_table_lists_every_variable() -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "events-tool-ci.md").read_text()
    for title, detected_by, field, source in variables_table():
        assert f"| {title} | {detected_by} | `{field}` | {source} |" in docs

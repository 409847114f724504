"""What a CI platform's environment says about the current run, as ci_event fields.

One table per provider, data not code paths: which variable says "this is provider X", and
how each ci_event field is read from the environment. ``docs/events-tool-ci.md`` prints the
same table for users; a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Env = Mapping[str, str]
Reader = Callable[[Env], str | None]


def _var(*names: str) -> Reader:
    """The first of ``names`` that is set and not empty."""

    def read(env: Env) -> str | None:
        for name in names:
            value = env.get(name, "").strip()
            if value:
                return value
        return None

    read.__doc__ = " or ".join(names)
    return read


def _branch(*names: str) -> Reader:
    """The first of ``names`` that is set, without a ``refs/heads/`` prefix."""
    first = _var(*names)

    def read(env: Env) -> str | None:
        value = first(env)
        return value.removeprefix("refs/heads/") if value else None

    read.__doc__ = " or ".join(names) + " (without refs/heads/)"
    return read


def _join(template: str, *names: str) -> Reader:
    """``template`` filled from ``names``, only when all of them are set."""

    def read(env: Env) -> str | None:
        values = [env.get(name, "").strip() for name in names]
        return template.format(*values) if all(values) else None

    read.__doc__ = template.format(*(f"${name}" for name in names))
    return read


def _mapped(name: str, table: Mapping[str, str], *, tag: str | None = None) -> Reader:
    """``table[$name]`` (``other`` for an unknown value); ``tag`` set means a tag build."""

    def read(env: Env) -> str | None:
        if tag is not None and env.get(tag, "").strip():
            return "tag"
        value = env.get(name, "").strip()
        if not value:
            return None
        return table.get(value, "other")

    read.__doc__ = f"${name} mapped" + (f"; tag when ${tag} is set" if tag else "")
    return read


@dataclass(frozen=True)
class Provider:
    name: str  # the ci_provider value
    title: str
    detect: str  # the variable whose presence says we run there
    fields: Mapping[str, Reader]

    def applies(self, env: Env) -> bool:
        return bool(env.get(self.detect, "").strip())

    def read(self, env: Env) -> dict[str, str]:
        values = {field: reader(env) for field, reader in self.fields.items()}
        return {field: value for field, value in values.items() if value is not None}


def _github_trigger(env: Env) -> str | None:
    if env.get("GITHUB_REF_TYPE") == "tag":
        return "tag"
    return _mapped(
        "GITHUB_EVENT_NAME",
        {
            "push": "push",
            "pull_request": "pull_request",
            "pull_request_target": "pull_request",
            "merge_group": "pull_request",
            "schedule": "schedule",
            "workflow_dispatch": "manual",
            "repository_dispatch": "manual",
        },
    )(env)


_github_trigger.__doc__ = "$GITHUB_EVENT_NAME mapped; tag when $GITHUB_REF_TYPE is tag"


def _buildkite_trigger(env: Env) -> str | None:
    if env.get("BUILDKITE_PULL_REQUEST", "false") not in ("", "false"):
        return "pull_request"
    return _mapped(
        "BUILDKITE_SOURCE",
        {"webhook": "push", "schedule": "schedule", "ui": "manual", "api": "manual"},
        tag="BUILDKITE_TAG",
    )(env)


_buildkite_trigger.__doc__ = (
    "pull_request when $BUILDKITE_PULL_REQUEST is a number, else $BUILDKITE_SOURCE mapped; "
    "tag when $BUILDKITE_TAG is set"
)


def _circle_trigger(env: Env) -> str | None:
    if env.get("CIRCLE_TAG", "").strip():
        return "tag"
    if env.get("CIRCLE_PULL_REQUEST", "").strip():
        return "pull_request"
    return "push" if env.get("CIRCLE_BRANCH", "").strip() else None


_circle_trigger.__doc__ = "tag with $CIRCLE_TAG, pull_request with $CIRCLE_PULL_REQUEST, else push"


def _jenkins_trigger(env: Env) -> str | None:
    if env.get("TAG_NAME", "").strip():
        return "tag"
    if env.get("CHANGE_ID", "").strip():
        return "pull_request"
    return None


_jenkins_trigger.__doc__ = "tag with $TAG_NAME, pull_request with $CHANGE_ID (multibranch)"


PROVIDERS: tuple[Provider, ...] = (
    Provider(
        "github_actions",
        "GitHub Actions",
        "GITHUB_ACTIONS",
        {
            "pipeline_id": _var("GITHUB_WORKFLOW_REF", "GITHUB_WORKFLOW"),
            "run_id": _var("GITHUB_RUN_ID"),
            "branch_name": _var("GITHUB_HEAD_REF", "GITHUB_REF_NAME"),
            "commit_id": _var("GITHUB_SHA"),
            "run_url": _join(
                "{}/{}/actions/runs/{}", "GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"
            ),
            "trigger_kind": _github_trigger,
        },
    ),
    Provider(
        "gitlab_ci",
        "GitLab CI",
        "GITLAB_CI",
        {
            "pipeline_id": _var("CI_PROJECT_PATH"),
            "run_id": _var("CI_PIPELINE_ID"),
            "branch_name": _var("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", "CI_COMMIT_BRANCH"),
            "commit_id": _var("CI_COMMIT_SHA"),
            "run_url": _var("CI_PIPELINE_URL"),
            "trigger_kind": _mapped(
                "CI_PIPELINE_SOURCE",
                {
                    "push": "push",
                    "merge_request_event": "pull_request",
                    "external_pull_request_event": "pull_request",
                    "schedule": "schedule",
                    "web": "manual",
                    "api": "manual",
                    "trigger": "manual",
                },
                tag="CI_COMMIT_TAG",
            ),
        },
    ),
    Provider(
        "jenkins",
        "Jenkins",
        "JENKINS_URL",
        {
            "pipeline_id": _var("JOB_NAME"),
            "run_id": _var("BUILD_NUMBER", "BUILD_ID"),
            "branch_name": _var("CHANGE_BRANCH", "BRANCH_NAME", "GIT_BRANCH"),
            "commit_id": _var("GIT_COMMIT"),
            "run_url": _var("BUILD_URL"),
            "trigger_kind": _jenkins_trigger,
        },
    ),
    Provider(
        "circleci",
        "CircleCI",
        "CIRCLECI",
        {
            "pipeline_id": _join("{}/{}", "CIRCLE_PROJECT_USERNAME", "CIRCLE_PROJECT_REPONAME"),
            "run_id": _var("CIRCLE_WORKFLOW_ID", "CIRCLE_BUILD_NUM"),
            "branch_name": _var("CIRCLE_BRANCH"),
            "commit_id": _var("CIRCLE_SHA1"),
            "run_url": _var("CIRCLE_BUILD_URL"),
            "trigger_kind": _circle_trigger,
        },
    ),
    Provider(
        "buildkite",
        "Buildkite",
        "BUILDKITE",
        {
            "pipeline_id": _var("BUILDKITE_PIPELINE_SLUG"),
            "run_id": _var("BUILDKITE_BUILD_ID", "BUILDKITE_BUILD_NUMBER"),
            "branch_name": _var("BUILDKITE_BRANCH"),
            "commit_id": _var("BUILDKITE_COMMIT"),
            "run_url": _var("BUILDKITE_BUILD_URL"),
            "trigger_kind": _buildkite_trigger,
        },
    ),
    Provider(
        "azure_pipelines",
        "Azure Pipelines",
        "TF_BUILD",
        {
            "pipeline_id": _var("SYSTEM_DEFINITIONID", "BUILD_DEFINITIONNAME"),
            "run_id": _var("BUILD_BUILDID"),
            "branch_name": _branch("SYSTEM_PULLREQUEST_SOURCEBRANCH", "BUILD_SOURCEBRANCH"),
            "commit_id": _var("BUILD_SOURCEVERSION"),
            "run_url": _join(
                "{}{}/_build/results?buildId={}",
                "SYSTEM_COLLECTIONURI",
                "SYSTEM_TEAMPROJECT",
                "BUILD_BUILDID",
            ),
            "trigger_kind": _mapped(
                "BUILD_REASON",
                {
                    "IndividualCI": "push",
                    "BatchedCI": "push",
                    "PullRequest": "pull_request",
                    "Schedule": "schedule",
                    "Manual": "manual",
                },
            ),
        },
    ),
)


def detect(env: Env) -> Provider | None:
    """The provider this environment belongs to, if any (the first that applies)."""
    return next((provider for provider in PROVIDERS if provider.applies(env)), None)


def ci_fields(env: Env) -> dict[str, str]:
    """``ci_provider`` and every field the environment provides; empty outside CI."""
    provider = detect(env)
    if provider is None:
        return {}
    return {"ci_provider": provider.name, **provider.read(env)}


def variables_table() -> list[tuple[str, str, str, str]]:
    """(provider, detected by, field, where it comes from) for the docs."""
    return [
        (provider.title, f"${provider.detect}", field, reader.__doc__ or "")
        for provider in PROVIDERS
        for field, reader in provider.fields.items()
    ]

"""The CI systems' environments the tests reproduce: each one's variables and the fields read from them."""

from __future__ import annotations

SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


CASES: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "github_actions": (
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKFLOW": "ci",
            "GITHUB_RUN_ID": "9876543210",
            "GITHUB_REF_NAME": "main",
            "GITHUB_SHA": SHA,
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": "acme/app",
            "GITHUB_EVENT_NAME": "push",
            "GITHUB_REF_TYPE": "branch",
        },
        {
            "pipeline_id": "ci",
            "run_id": "9876543210",
            "branch_name": "main",
            "commit_id": SHA,
            "run_url": "https://github.com/acme/app/actions/runs/9876543210",
            "trigger_kind": "push",
        },
    ),
    "gitlab_ci": (
        {
            "GITLAB_CI": "true",
            "CI_PROJECT_PATH": "acme/app",
            "CI_PIPELINE_ID": "4242",
            "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feature/x",
            "CI_COMMIT_BRANCH": "",
            "CI_COMMIT_SHA": SHA,
            "CI_PIPELINE_URL": "https://gitlab.example/acme/app/-/pipelines/4242",
            "CI_PIPELINE_SOURCE": "merge_request_event",
        },
        {
            "pipeline_id": "acme/app",
            "run_id": "4242",
            "branch_name": "feature/x",
            "commit_id": SHA,
            "run_url": "https://gitlab.example/acme/app/-/pipelines/4242",
            "trigger_kind": "pull_request",
        },
    ),
    "jenkins": (
        {
            "JENKINS_URL": "https://jenkins.example/",
            "JOB_NAME": "app/main",
            "BUILD_NUMBER": "17",
            "BRANCH_NAME": "main",
            "GIT_COMMIT": SHA,
            "BUILD_URL": "https://jenkins.example/job/app/job/main/17/",
            "TAG_NAME": "v1.2.0",
        },
        {
            "pipeline_id": "app/main",
            "run_id": "17",
            "branch_name": "main",
            "commit_id": SHA,
            "run_url": "https://jenkins.example/job/app/job/main/17/",
            "trigger_kind": "tag",
        },
    ),
    "circleci": (
        {
            "CIRCLECI": "true",
            "CIRCLE_PROJECT_USERNAME": "acme",
            "CIRCLE_PROJECT_REPONAME": "app",
            "CIRCLE_WORKFLOW_ID": "6e3b1c2a-0000-4000-8000-000000000001",
            "CIRCLE_BRANCH": "dev",
            "CIRCLE_SHA1": SHA,
            "CIRCLE_BUILD_URL": "https://circleci.com/gh/acme/app/88",
            "CIRCLE_PULL_REQUEST": "https://github.com/acme/app/pull/5",
        },
        {
            "pipeline_id": "acme/app",
            "run_id": "6e3b1c2a-0000-4000-8000-000000000001",
            "branch_name": "dev",
            "commit_id": SHA,
            "run_url": "https://circleci.com/gh/acme/app/88",
            "trigger_kind": "pull_request",
        },
    ),
    "buildkite": (
        {
            "BUILDKITE": "true",
            "BUILDKITE_PIPELINE_SLUG": "app",
            "BUILDKITE_BUILD_ID": "0190d1a3-0000-4000-8000-000000000002",
            "BUILDKITE_BRANCH": "main",
            "BUILDKITE_COMMIT": SHA,
            "BUILDKITE_BUILD_URL": "https://buildkite.com/acme/app/builds/12",
            "BUILDKITE_SOURCE": "schedule",
            "BUILDKITE_PULL_REQUEST": "false",
        },
        {
            "pipeline_id": "app",
            "run_id": "0190d1a3-0000-4000-8000-000000000002",
            "branch_name": "main",
            "commit_id": SHA,
            "run_url": "https://buildkite.com/acme/app/builds/12",
            "trigger_kind": "schedule",
        },
    ),
    "azure_pipelines": (
        {
            "TF_BUILD": "True",
            "SYSTEM_DEFINITIONID": "12",
            "BUILD_BUILDID": "345",
            "BUILD_SOURCEBRANCH": "refs/heads/release/2.0",
            "BUILD_SOURCEVERSION": SHA,
            "SYSTEM_COLLECTIONURI": "https://dev.azure.com/acme/",
            "SYSTEM_TEAMPROJECT": "app",
            "BUILD_REASON": "Manual",
        },
        {
            "pipeline_id": "12",
            "run_id": "345",
            "branch_name": "release/2.0",
            "commit_id": SHA,
            "run_url": "https://dev.azure.com/acme/app/_build/results?buildId=345",
            "trigger_kind": "manual",
        },
    ),
}

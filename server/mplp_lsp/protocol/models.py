"""Typed models of the four integration payloads and the envelope.

They are for building and reading events in code; the JSON schemas stay the normative
check. ``to_json()`` gives exactly the JSON that validates: absent optional fields are left
out (never ``null``), timestamps keep the text they were given.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from mplp_lsp.protocol.formats import is_date_time, is_email, is_uri, is_uuid, is_uuid_v4_lower
from mplp_lsp.protocol.kinds import Kind, kind_for_event_type


def _checked(check: Any, what: str) -> AfterValidator:
    def validate(value: str) -> str:
        if not check(value):
            raise ValueError(f"not a valid {what}")
        return value

    return AfterValidator(validate)


def _integral(value: Any) -> Any:
    # JSON Schema counts 1.0 as an integer; so must the models, or valid JSON would not load.
    return int(value) if isinstance(value, float) and value.is_integer() else value


Int = Annotated[int, BeforeValidator(_integral)]
DateTime = Annotated[str, _checked(is_date_time, "RFC 3339 date-time")]
Email = Annotated[str, _checked(is_email, "e-mail address")]
Uri = Annotated[str, _checked(is_uri, "absolute URI")]
Uuid = Annotated[str, _checked(is_uuid, "UUID")]
UuidV4 = Annotated[str, _checked(is_uuid_v4_lower, "lowercase UUID v4")]
NonEmpty = Annotated[str, Field(min_length=1)]
Count = Annotated[Int, Field(ge=0)]

ToolKind = Literal["formatter", "linter", "test_runner", "generator", "other"]
RunStatus = Literal["pending", "running", "succeeded", "failed", "cancelled"]
ChangeType = Literal["created", "modified", "deleted", "renamed"]
GitEventKind = Literal["commit", "push", "merge", "tag", "branch_create", "branch_delete"]
StageStatus = Literal["pending", "running", "succeeded", "failed", "cancelled", "skipped"]
TriggerKind = Literal["push", "pull_request", "schedule", "manual", "tag", "other"]
EventFamily = Literal["ExternalIntegrationEvent", "external_integration"]
EventType = Literal["file_update", "git_operation", "ci_pipeline", "tool_execution"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class ToolEvent(_Closed):
    tool_id: NonEmpty
    tool_kind: ToolKind
    invocation_id: UuidV4
    status: RunStatus
    started_at: DateTime | None = None
    completed_at: DateTime | None = None
    exit_code: Int | None = None
    output_summary: str | None = None
    args: list[str] | None = None
    working_directory: str | None = None


class FileUpdateEvent(_Closed):
    file_path: NonEmpty
    change_type: ChangeType
    timestamp: DateTime
    workspace_root: str | None = None
    change_summary: str | None = None
    lines_added: Count | None = None
    lines_removed: Count | None = None
    previous_path: str | None = None
    encoding: str | None = None
    language: str | None = None


class GitEvent(_Closed):
    repo_url: NonEmpty
    commit_id: NonEmpty
    ref_name: NonEmpty
    event_kind: GitEventKind
    timestamp: DateTime
    author_name: str | None = None
    author_email: Email | None = None
    commit_message: str | None = None
    files_changed: Count | None = None
    insertions: Count | None = None
    deletions: Count | None = None
    parent_commits: list[str] | None = None


class CiStage(_Closed):
    stage_name: str
    status: StageStatus
    duration_ms: Count | None = None


class CiEvent(_Closed):
    ci_provider: NonEmpty
    pipeline_id: NonEmpty
    run_id: NonEmpty
    status: RunStatus
    started_at: DateTime | None = None
    completed_at: DateTime | None = None
    branch_name: str | None = None
    commit_id: str | None = None
    run_url: Uri | None = None
    duration_ms: Count | None = None
    stages: list[CiStage] | None = None
    trigger_kind: TriggerKind | None = None


Payload = ToolEvent | FileUpdateEvent | GitEvent | CiEvent

PAYLOAD_MODELS: dict[Kind, type[_Closed]] = {
    Kind.TOOL: ToolEvent,
    Kind.FILE_UPDATE: FileUpdateEvent,
    Kind.GIT: GitEvent,
    Kind.CI: CiEvent,
}


class ExternalIntegrationEvent(_Closed):
    event_id: Uuid
    event_family: EventFamily
    event_type: EventType
    timestamp: DateTime
    source_module: NonEmpty
    source: NonEmpty
    payload: Payload
    project_id: Uuid | None = None

    @model_validator(mode="before")
    @classmethod
    def _payload_by_event_type(cls, data: Any) -> Any:
        # The payload's model follows event_type; a plain union would guess.
        if isinstance(data, dict) and isinstance(data.get("payload"), dict):
            kind = kind_for_event_type(data.get("event_type"))
            if kind is not None:
                return {**data, "payload": PAYLOAD_MODELS[kind].model_validate(data["payload"])}
        return data

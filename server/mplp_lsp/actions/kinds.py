"""The actions the AEL runs, as typed models; a bad action is a ValidationResult, not a crash.

An action is a JSON object with a ``type``: ``tool`` (a subprocess), ``file`` (write, rename
or delete inside the workspace), ``http`` (an external API call), ``llm`` (an
OpenAI-compatible chat completion) or ``noop`` (the reference action: nothing to do). Any
action may name its own ``compensate`` action, the inverse the runtime runs if the plan
fails later; file operations compute theirs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from mplp_lsp.protocol.result import ErrorCode, ValidationIssue, ValidationResult, format_path

_Timeout = Annotated[float, Field(gt=0, le=86_400)]


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    compensate: dict[str, Any] | None = None


class NoopAction(_Action):
    type: Literal["noop"] = "noop"
    note: str | None = None


class ToolAction(_Action):
    type: Literal["tool"]
    argv: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    tool_kind: Literal["formatter", "linter", "test_runner", "generator", "other"] = "other"
    tool_id: str | None = None
    cwd: str | None = None  # workspace-relative; the workspace root by default
    timeout_s: _Timeout = 600


class FileAction(_Action):
    type: Literal["file"]
    op: Literal["write", "rename", "delete"]
    path: Annotated[str, Field(min_length=1)]
    content: str | None = None  # write: text (UTF-8)
    content_base64: str | None = None  # write: bytes, for inverses of binary files
    to: str | None = None  # rename: the new path


class HttpAction(_Action):
    type: Literal["http"]
    url: Annotated[str, Field(pattern=r"^https?://")]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    json_body: Any = None
    timeout_s: _Timeout = 30


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class LlmAction(_Action):
    type: Literal["llm"]
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    model: str | None = None  # the llmModel setting by default
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    timeout_s: _Timeout = 120


Action = Annotated[
    NoopAction | ToolAction | FileAction | HttpAction | LlmAction, Field(discriminator="type")
]
_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)

_CODES = {
    "missing": ErrorCode.REQUIRED,
    "extra_forbidden": ErrorCode.EXTRA_FORBIDDEN,
    "literal_error": ErrorCode.ENUM,
    "union_tag_invalid": ErrorCode.ENUM,
    "union_tag_not_found": ErrorCode.REQUIRED,
    "string_pattern_mismatch": ErrorCode.PATTERN,
    "string_too_short": ErrorCode.MIN_LENGTH,
    "too_short": ErrorCode.MIN_ITEMS,
    "greater_than": ErrorCode.MINIMUM,
    "greater_than_equal": ErrorCode.MINIMUM,
    "less_than_equal": ErrorCode.MAXIMUM,
}


def parse_action(data: Any) -> Action | ValidationResult:
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as error:
        issues = []
        for problem in error.errors(include_url=False):
            # drop the union branch name pydantic puts in the location
            loc = [p for i, p in enumerate(problem["loc"]) if not (i == 0 and p in _TYPES)]
            code = _CODES.get(problem["type"])
            if code is None:
                code = ErrorCode.TYPE if problem["type"].endswith("_type") else ErrorCode.UNKNOWN
            issues.append(ValidationIssue(format_path(loc), str(code), problem["msg"]))
        return ValidationResult.failure(issues)


_TYPES = frozenset({"noop", "tool", "file", "http", "llm"})

EXECUTOR_KINDS: dict[str, Literal["agent", "tool", "llm", "worker", "external"]] = {
    "noop": "agent",
    "tool": "tool",
    "file": "worker",
    "http": "external",
    "llm": "llm",
}

"""The one error shape used by the CLI, the HTTP API and the LSP side.

It follows the upstream SDKs: ``{ok, errors: [{path, code, message}]}`` with paths in
dot/bracket form (``steps[0].step_id``). Codes are stable strings; clients branch on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    # Schema codes, as the upstream SDKs name them.
    REQUIRED = "required"
    TYPE = "type"
    ENUM = "enum"
    PATTERN = "pattern"
    FORMAT = "format"
    MIN_LENGTH = "min_length"
    MAX_LENGTH = "max_length"
    MINIMUM = "minimum"
    MAXIMUM = "maximum"
    EXTRA_FORBIDDEN = "extra_forbidden"
    UNKNOWN = "unknown"
    # Schema keywords the upstream set folds into "unknown"; we name them.
    MIN_ITEMS = "min_items"
    MAX_ITEMS = "max_items"
    CONST = "const"
    # Invariant rules (schemas/v2/invariants/*.yaml), one code per rule kind.
    INVARIANT_NON_EMPTY_STRING = "invariant_non_empty_string"
    INVARIANT_ENUM = "invariant_enum"
    INVARIANT_UUID_V4 = "invariant_uuid_v4"
    INVARIANT_ISO_DATETIME = "invariant_iso_datetime"
    INVARIANT_MIN_LENGTH = "invariant_min_length"
    INVARIANT_EQ = "invariant_eq"
    INVARIANT_EXISTS = "invariant_exists"
    INVARIANT_POSITIVE_INTEGER = "invariant_positive_integer"
    INVARIANT_OPTIONAL_STRING = "invariant_optional_string"
    INVARIANT_ONE_OF = "invariant_one_of"
    # Input that never reached a schema.
    INVALID_JSON = "invalid_json"
    NESTING_TOO_DEEP = "nesting_too_deep"
    UNKNOWN_KIND = "unknown_kind"
    # Sanitisation of untrusted input (paths, text).
    TEXT_NOT_UNICODE = "text_not_unicode"  # a lone surrogate: no UTF-8 form to store or send
    PATH_OUTSIDE_WORKSPACE = "path_outside_workspace"
    PATH_TRAVERSAL = "path_traversal"
    PATH_SYMLINK_ESCAPE = "path_symlink_escape"
    PATH_SYMLINK_LOOP = "path_symlink_loop"
    PATH_CONTROL_CHARACTER = "path_control_character"
    PATH_NOT_UTF8 = "path_not_utf8"
    PATH_INVALID = "path_invalid"
    # the path itself holds something that looks like a credential (an error code, not a secret)
    PATH_SECRET = "path_secret"  # noqa: S105
    # .git/ and the state dir: the repository's and the daemon's own files, never events
    PATH_RESERVED = "path_reserved"
    UNSUPPORTED_URI = "unsupported_uri"
    # The PSG and the L2 lifecycles (runtime errors; the message names the specifics).
    TRANSITION_FORBIDDEN = "transition_forbidden"  # not a move of the lifecycle table
    TRANSITION_FROM_TERMINAL = "transition_from_terminal"  # the object's state is final
    TRANSITION_PRECONDITION = "transition_precondition"  # a move of the table, guard unmet
    INITIAL_STATUS = "initial_status"  # new plans start draft, new steps pending
    STALE_CHANGE = "stale_change"  # older than what the graph records: never moves back
    REFERENCE_UNRESOLVED = "reference_unresolved"
    DEPENDENCY_CYCLE = "dependency_cycle"
    DEPENDENCY_OUTSIDE_PLAN = "dependency_outside_plan"
    DUPLICATE_ID = "duplicate_id"
    TRACE_SEGMENT_IMMUTABLE = "trace_segment_immutable"
    NOT_FOUND = "not_found"
    # The action execution layer (actions): why an action failed.
    ACTION_FAILED = "action_failed"  # the action raised something unexpected
    ACTION_TIMEOUT = "action_timeout"
    ACTION_CANCELLED = "action_cancelled"
    TOOL_FAILED = "tool_failed"  # the tool ran and exited non-zero (or could not start)
    FILE_OP_FAILED = "file_op_failed"
    HTTP_ERROR = "http_error"  # unreachable, or an HTTP status of 400 or more
    LLM_NOT_CONFIGURED = "llm_not_configured"
    LLM_BAD_RESPONSE = "llm_bad_response"
    # The loopback HTTP API.
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN_HOST = "forbidden_host"
    FORBIDDEN_PEER = "forbidden_peer"
    FORBIDDEN_ORIGIN = "forbidden_origin"
    REQUEST_TIMEOUT = "request_timeout"
    BODY_TOO_LARGE = "body_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    INVALID_PARAMETER = "invalid_parameter"
    STORAGE_FULL = "storage_full"  # the disk holding the store is full (HTTP 507)


@dataclass(frozen=True, slots=True)
class ValidationIssue:
    path: str
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class ValidationResult:
    ok: bool
    errors: tuple[ValidationIssue, ...] = field(default=())

    @classmethod
    def success(cls) -> ValidationResult:
        return _SUCCESS

    @classmethod
    def failure(cls, errors: Iterable[ValidationIssue]) -> ValidationResult:
        collected = tuple(errors)
        if not collected:
            raise ValueError("a failed ValidationResult needs at least one error")
        return cls(ok=False, errors=collected)

    @classmethod
    def single(cls, path: str, code: ErrorCode | str, message: str) -> ValidationResult:
        return cls.failure([ValidationIssue(path, str(code), message)])

    @property
    def codes(self) -> list[str]:
        return [issue.code for issue in self.errors]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "errors": [issue.to_dict() for issue in self.errors]}


_SUCCESS = ValidationResult(ok=True)


def format_path(parts: Sequence[str | int]) -> str:
    """Render a JSON location as ``a.b[0].c`` (the upstream SDK notation)."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif out:
            out.append(f".{part}")
        else:
            out.append(part)
    return "".join(out)

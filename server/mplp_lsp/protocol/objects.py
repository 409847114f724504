"""Validating the PSG's protocol objects (Context, Plan, Confirm, Trace and its segments).

The schemas are the project's own copies under ``schemas/v2/`` (structurally equal to the
upstream MPLP v1.0 module schemas); an object enters the graph only if it passes them.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from typing import Any

from mplp_lsp.protocol.result import ValidationResult
from mplp_lsp.protocol.validator import SchemaCheck

_BASE = "https://mplp-lsp.invalid/schemas/v2/"


class ObjectKind(StrEnum):
    CONTEXT = "context"
    PLAN = "plan"
    CONFIRM = "confirm"
    TRACE = "trace"
    TRACE_SEGMENT = "trace_segment"


_REFS: dict[ObjectKind, str] = {
    ObjectKind.CONTEXT: _BASE + "mplp-context.schema.json",
    ObjectKind.PLAN: _BASE + "mplp-plan.schema.json",
    ObjectKind.CONFIRM: _BASE + "mplp-confirm.schema.json",
    ObjectKind.TRACE: _BASE + "mplp-trace.schema.json",
    ObjectKind.TRACE_SEGMENT: _BASE + "mplp-trace.schema.json#/$defs/trace_segment_core",
}


@cache
def _check(kind: ObjectKind) -> SchemaCheck:
    return SchemaCheck.for_ref(_REFS[kind])


def validate_object(kind: ObjectKind, data: Any) -> ValidationResult:
    return _check(kind).validate(data)

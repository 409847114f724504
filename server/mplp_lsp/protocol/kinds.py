"""The kinds of object the validator knows, and how each maps to schemas and invariants."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    TOOL = "tool"
    FILE_UPDATE = "file_update"
    GIT = "git"
    CI = "ci"
    ENVELOPE = "envelope"
    PIPELINE_STAGE = "pipeline_stage"
    GRAPH_UPDATE = "graph_update"
    RUNTIME_EXECUTION = "runtime_execution"


PAYLOAD_KINDS: tuple[Kind, ...] = (Kind.TOOL, Kind.FILE_UPDATE, Kind.GIT, Kind.CI)
EVENT_FAMILY_KINDS: tuple[Kind, ...] = (
    Kind.PIPELINE_STAGE,
    Kind.GRAPH_UPDATE,
    Kind.RUNTIME_EXECUTION,
)
# What the event log stores an event as (an envelope is stored as its payload's kind).
STORED_KINDS: tuple[Kind, ...] = (*PAYLOAD_KINDS, *EVENT_FAMILY_KINDS)

SPEC_FAMILY = "ExternalIntegrationEvent"
UPSTREAM_FAMILY = "external_integration"
INTEGRATION_FAMILIES = frozenset({SPEC_FAMILY, UPSTREAM_FAMILY})


# eq=False: nothing compares these (what `events` loads: docs/daemon.md).
@dataclass(frozen=True, slots=True, eq=False)
class KindSpec:
    schema: str
    invariant_scope: str
    event_type: str | None = None  # envelope event_type for a payload kind


SPECS: dict[Kind, KindSpec] = {
    Kind.TOOL: KindSpec(
        "v2/integration/mplp-tool-event.schema.json", "tool_event", "tool_execution"
    ),
    Kind.FILE_UPDATE: KindSpec(
        "v2/integration/mplp-file-update-event.schema.json", "file_update_event", "file_update"
    ),
    Kind.GIT: KindSpec("v2/integration/mplp-git-event.schema.json", "git_event", "git_operation"),
    Kind.CI: KindSpec("v2/integration/mplp-ci-event.schema.json", "ci_event", "ci_pipeline"),
    Kind.ENVELOPE: KindSpec("v2/events/mplp-external-integration-event.schema.json", "event"),
    Kind.PIPELINE_STAGE: KindSpec("v2/events/mplp-pipeline-stage-event.schema.json", "event"),
    Kind.GRAPH_UPDATE: KindSpec("v2/events/mplp-graph-update-event.schema.json", "event"),
    Kind.RUNTIME_EXECUTION: KindSpec("v2/events/mplp-runtime-execution-event.schema.json", "event"),
}

KIND_BY_EVENT_TYPE: dict[str, Kind] = {
    spec.event_type: kind for kind, spec in SPECS.items() if spec.event_type is not None
}

# Properties that only one payload kind has; used to recognise a bare payload.
_SIGNATURES: dict[Kind, frozenset[str]] = {
    Kind.TOOL: frozenset(
        {"tool_id", "tool_kind", "invocation_id", "exit_code", "output_summary", "args"}
    ),
    Kind.FILE_UPDATE: frozenset(
        {
            "file_path",
            "change_type",
            "workspace_root",
            "previous_path",
            "lines_added",
            "lines_removed",
        }
    ),
    Kind.GIT: frozenset(
        {"repo_url", "ref_name", "event_kind", "author_name", "author_email", "parent_commits"}
    ),
    Kind.CI: frozenset(
        {"ci_provider", "pipeline_id", "run_id", "run_url", "stages", "trigger_kind"}
    ),
}


def kind_for_event_type(event_type: Any) -> Kind | None:
    """The payload kind an envelope's event_type names; None for anything else (any type)."""
    return KIND_BY_EVENT_TYPE.get(event_type) if isinstance(event_type, str) else None


def event_type_for(kind: Kind) -> str:
    event_type = SPECS[kind].event_type
    if event_type is None:
        raise ValueError(f"{kind} is not an integration payload kind")
    return event_type


def detect_kind(data: Any) -> Kind | None:
    """Recognise an envelope, an observability event, or a bare payload; None if unsure."""
    if not isinstance(data, dict):
        return None
    family = data.get("event_family")
    if family is not None:
        if family in INTEGRATION_FAMILIES:
            return Kind.ENVELOPE
        return Kind(family) if family in {k.value for k in EVENT_FAMILY_KINDS} else None
    keys = data.keys()
    scores = {kind: len(signature & keys) for kind, signature in _SIGNATURES.items()}
    best = max(scores.values())
    winners = [kind for kind, score in scores.items() if score == best]
    return winners[0] if best > 0 and len(winners) == 1 else None

"""Envelopes as OTLP log records, in the OTLP/JSON mapping (docs/forwarding.md#opentelemetry).

One LogRecord per envelope: the body is the envelope exactly as stored (a string: the
bytes the collector would get, no number re-typed on the way), ``timeUnixNano`` the event's
own time (a file change's or a commit's, a tool or CI run's end, else its start, else the
envelope's), ``observedTimeUnixNano`` when it was recorded, ``eventName`` from the event
type, and attributes from the OpenTelemetry semantic conventions where the payload has the
value (``vcs.*``, ``cicd.*``, ``code.file.path``, ``process.exit.code``), the rest under
``mplp.*``. The same structure is the JSON body and, parsed by ``opentelemetry-proto``, the
protobuf one (:mod:`.otlp`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from mplp_lsp import __version__
from mplp_lsp.forward.outbox import Entry
from mplp_lsp.protocol.kinds import Kind, event_type_for

__all__ = ["EVENT_NAME_PREFIX", "SCOPE_NAME", "attributes", "log_record", "logs_request"]

SCOPE_NAME: Final = "mplp-lsp"
EVENT_NAME_PREFIX: Final = "mplp."
_SEVERITY_INFO: Final = 9  # SeverityNumber INFO
_SEVERITY_WARN: Final = 13

# cicd.pipeline.run.state and cicd.pipeline.result for a CI event's status.
_CI_STATE: Final = {"pending": "pending", "running": "executing"}
_CI_RESULT: Final = {"succeeded": "success", "failed": "failure", "cancelled": "cancellation"}
_REF_TYPES: Final = (("refs/heads/", "branch"), ("refs/tags/", "tag"))
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def logs_request(entries: Sequence[Entry], resource: Mapping[str, str]) -> dict[str, Any]:
    """An ``ExportLogsServiceRequest`` in OTLP/JSON: one resource, one scope, one record
    per entry, in ``seq`` order."""
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": _key_values(resource)},
                "scopeLogs": [
                    {
                        "scope": {"name": SCOPE_NAME, "version": __version__},
                        "logRecords": [log_record(entry) for entry in entries],
                    }
                ],
            }
        ]
    }


def log_record(entry: Entry) -> dict[str, Any]:
    envelope = json.loads(entry.body)
    payload = envelope.get("payload")
    payload = payload if isinstance(payload, dict) else {}
    recorded = _nanos(envelope.get("timestamp"))
    happened = next(
        (
            n
            for n in (
                _nanos(payload.get(key)) for key in ("timestamp", "completed_at", "started_at")
            )
            if n is not None
        ),
        recorded,
    )
    event_type = str(envelope.get("event_type") or "event")
    record: dict[str, Any] = {
        "severityNumber": _SEVERITY_WARN if payload.get("status") == "failed" else _SEVERITY_INFO,
        "severityText": "WARN" if payload.get("status") == "failed" else "INFO",
        "body": {"stringValue": entry.body},
        "eventName": EVENT_NAME_PREFIX + event_type,
        "attributes": _key_values(attributes(envelope, payload)),
    }
    if happened is not None:
        record["timeUnixNano"] = str(happened)
    if recorded is not None:
        record["observedTimeUnixNano"] = str(recorded)
    return record


def attributes(envelope: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """The record's attributes: the event's identity, then what its kind maps."""
    event_type = str(envelope.get("event_type") or "event")
    found: dict[str, Any] = {
        # Receivers older than the LogRecord.event_name field keep it as an attribute.
        "event.name": EVENT_NAME_PREFIX + event_type,
        "mplp.event.id": envelope.get("event_id"),
        "mplp.event.family": envelope.get("event_family"),
        "mplp.source_module": envelope.get("source_module"),
    }
    mapper = _MAPPERS.get(event_type)
    if mapper is not None:
        found.update(mapper(payload))
    return {key: value for key, value in found.items() if value is not None and value != ""}


def _file(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "code.file.path": payload.get("file_path"),
        "mplp.file.change_type": payload.get("change_type"),
        "mplp.file.previous_path": payload.get("previous_path"),
    }


def _git(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "vcs.repository.url.full": payload.get("repo_url"),
        **_ref(payload.get("ref_name"), payload.get("commit_id")),
        "mplp.git.event_kind": payload.get("event_kind"),
    }


def _ci(payload: Mapping[str, Any]) -> dict[str, Any]:
    status = payload.get("status")
    branch = payload.get("branch_name")
    ref = f"refs/heads/{branch}" if isinstance(branch, str) and branch else None
    return {
        "cicd.pipeline.name": payload.get("pipeline_id"),
        "cicd.pipeline.run.id": payload.get("run_id"),
        "cicd.pipeline.run.url.full": payload.get("run_url"),
        "cicd.pipeline.run.state": _CI_STATE.get(status) if isinstance(status, str) else None,
        "cicd.pipeline.result": _CI_RESULT.get(status) if isinstance(status, str) else None,
        **_ref(ref, payload.get("commit_id")),
        "mplp.ci.provider": payload.get("ci_provider"),
        "mplp.ci.trigger_kind": payload.get("trigger_kind"),
    }


def _tool(payload: Mapping[str, Any]) -> dict[str, Any]:
    exit_code = payload.get("exit_code")
    return {
        "process.exit.code": exit_code if isinstance(exit_code, int) else None,
        "mplp.tool.id": payload.get("tool_id"),
        "mplp.tool.kind": payload.get("tool_kind"),
        "mplp.tool.status": payload.get("status"),
        "mplp.tool.invocation_id": payload.get("invocation_id"),
    }


def _ref(ref_name: Any, revision: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"vcs.ref.head.revision": revision}
    if isinstance(ref_name, str) and ref_name:
        name, kind = ref_name, None
        for prefix, ref_kind in _REF_TYPES:
            if ref_name.startswith(prefix):
                name, kind = ref_name[len(prefix) :], ref_kind
        found["vcs.ref.head.name"] = name
        found["vcs.ref.head.type"] = kind
    return found


# By event type (protocol.kinds: file_update, git_operation, ci_pipeline, tool_execution).
_MAPPERS: Final[dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    event_type_for(Kind.FILE_UPDATE): _file,
    event_type_for(Kind.GIT): _git,
    event_type_for(Kind.CI): _ci,
    event_type_for(Kind.TOOL): _tool,
}


def _nanos(text: Any) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 time; None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _key_values(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _any_value(value)} for key, value in values.items()]


def _any_value(value: Any) -> dict[str, Any]:
    # A number AnyValue cannot hold (beyond int64, not finite) goes as its text.
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int) and _INT64_MIN <= value <= _INT64_MAX:
        return {"intValue": str(value)}  # int64 is a string in OTLP/JSON
    if isinstance(value, float) and math.isfinite(value):
        return {"doubleValue": value}
    return {"stringValue": str(value)}

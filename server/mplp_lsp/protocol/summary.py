"""One human line about a stored envelope, for ``events``, ``watch`` and the dashboard.

Any field may be missing or of another type: envelopes received from elsewhere, and the
upstream family's names, carry other fields. A missing part is left out of the line rather
than shown as a blank column or a placeholder. Control characters are shown escaped: a file
name with a newline must not print as a second, forged event line.
"""

from __future__ import annotations

from typing import Any

_COMMIT_CHARS = 12  # enough to tell commits apart, as git's own short ids do


_NO_SUMMARY = "(no summary: see --json)"
_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F]}


def summary(envelope: dict[str, Any]) -> str:
    line = _parts(envelope)
    return line if line.strip() else _NO_SUMMARY


def _parts(envelope: dict[str, Any]) -> str:
    payload = envelope.get("payload")
    payload = payload if isinstance(payload, dict) else {}
    family = envelope.get("event_family")
    if "file_path" in payload:
        moved = f"(from {_text(payload, 'previous_path')})" if payload.get("previous_path") else ""
        return _line(_text(payload, "change_type"), _text(payload, "file_path"), moved)
    if "event_kind" in payload:
        commit = _text(payload, "commit_id")[:_COMMIT_CHARS]
        return _line(_text(payload, "event_kind"), _text(payload, "ref_name"), commit)
    if "tool_id" in payload:
        kind = _text(payload, "tool_kind")
        return _line(
            _text(payload, "status"), _text(payload, "tool_id"), f"({kind})" if kind else ""
        )
    if "ci_provider" in payload:
        run = _text(payload, "run_id")
        return _line(
            _text(payload, "status"),
            _text(payload, "ci_provider"),
            _text(payload, "pipeline_id"),
            f"#{run}" if run else "",
        )
    if family == "graph_update":
        return _graph_line(envelope, payload)
    if family == "pipeline_stage":
        stage = _text(envelope, "stage_name") or _text(envelope, "stage_id")
        return _line(_text(envelope, "stage_status"), stage, _text(envelope, "event_type"))
    if family == "runtime_execution":
        return _line(
            _text(envelope, "status"),
            _text(envelope, "executor_kind"),
            _text(envelope, "event_type"),
        )
    return _text(envelope, "event_type")


def _graph_line(envelope: dict[str, Any], payload: dict[str, Any]) -> str:
    kind = _text(envelope, "update_kind")
    label = f"{kind:<11}" if kind else ""
    node_type = _text(payload, "node_type")
    if kind == "bulk":
        changes = payload.get("changes")
        count = (
            sum(v for v in changes.values() if isinstance(v, int))
            if isinstance(changes, dict)
            else 0
        )
        nodes = f"{count:,} {node_type + ' ' if node_type else ''}node{'s' if count != 1 else ''}"
        cause = _text(payload, "cause")
        return _line(label, nodes, f"({cause})" if cause else _text(envelope, "event_type"))
    node = _text(payload, "node_id")
    if len(node) == 40 and all(c in "0123456789abcdef" for c in node):
        node = node[:_COMMIT_CHARS]
    return _line(label, node_type, node or _text(envelope, "event_type"))


def _text(source: dict[str, Any], key: str) -> str:
    value = source.get(key)
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return text.translate(_ESCAPES)


def _line(label: str, *parts: str) -> str:
    """The label in a column of its own (9 wide, as the change types are), then the parts."""
    rest = " ".join(part for part in parts if part)
    if not label:
        return rest
    return f"{label:<9} {rest}".rstrip()

"""The forwarding part of ``mplp-lsp status`` and of the ``mplp/status`` notification."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from mplp_lsp.forward.outbox import COLLECTOR, OutboxState, sink_names, state_of

__all__ = ["forward_status"]


def forward_status(
    conn: sqlite3.Connection, runtime: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Per sink: queue depth, oldest pending age, last success and error, and every
    counter; the collector's at the top (as before sinks), every sink's under ``sinks``.

    ``runtime`` is what the running forwarders add (state, remote; their own under its
    ``sinks``); without it (the CLI reading a store) the state is what the store says. None
    for a store without an outbox.
    """
    try:
        names = sink_names(conn)
    except sqlite3.OperationalError:  # a store written before forwarding existed
        return None
    live = (runtime or {}).get("sinks") or {}
    sinks = {}
    for name in dict.fromkeys([*names, *live]):
        sinks[name] = _sink_report(state_of(conn, name), name, live.get(name))
    if runtime is not None and COLLECTOR not in sinks:
        sinks[COLLECTOR] = _sink_report(None, COLLECTOR, runtime)
    lead = _lead(sinks)
    if lead != COLLECTOR:
        top = dict(sinks[lead])
    else:
        top = dict(sinks.get(COLLECTOR) or _sink_report(None, COLLECTOR, None))
        if runtime is not None:
            top.update({key: value for key, value in runtime.items() if key != "sinks"})
            if runtime.get("state") == "off" and top["enabled"]:
                top["state"] = "queuing"
    top["sinks"] = sinks
    return top


def _lead(sinks: dict[str, dict[str, Any]]) -> str:
    """The sink whose fields go at the top, which the editors' status items show: the
    collector while it is in use (as before sinks), else the first sink in use (an OTLP sink
    alone would otherwise read as forwarding off while it sends)."""
    in_use = [name for name, report in sinks.items() if report["enabled"] or report["remote"]]
    return COLLECTOR if COLLECTOR in in_use or not in_use else in_use[0]


def _sink_report(
    state: OutboxState | None, name: str, runtime: dict[str, Any] | None
) -> dict[str, Any]:
    age = None
    if state is not None and state.oldest_pending_at is not None:
        oldest = datetime.fromisoformat(state.oldest_pending_at.replace("Z", "+00:00"))
        age = max(0.0, round((datetime.now(UTC) - oldest).total_seconds(), 3))
    enabled = state is not None and state.enabled
    report: dict[str, Any] = {
        "sink": name,
        "enabled": enabled,
        "state": "queuing" if enabled else "off",
        "remote": None,
        "queued_for": state.queued_for if state else None,
        "held": state.held if state else {},
        "depth": state.pending if state else 0,
        "pending_bytes": state.pending_bytes if state else 0,
        "budget_bytes": state.budget_bytes if state else 0,
        "oldest_pending_age_s": age,
        "last_success_at": state.last_success_at if state else None,
        "last_error": state.last_error if state else None,
        "last_error_at": state.last_error_at if state else None,
        "delivered": state.delivered if state else 0,
        "dead_lettered": state.dead_lettered if state else 0,
        "dead_letters": state.dead_letters if state else 0,
        "rejected": state.rejected if state else 0,
        "overflow_dropped": state.overflow_dropped if state else 0,
        "quarantined": state.quarantined if state else 0,
        "batches_sent": state.batches_sent if state else 0,
        "failed_attempts": state.failed_attempts if state else 0,
    }
    if runtime is not None:
        report.update({key: value for key, value in runtime.items() if key != "sinks"})
        if runtime.get("state") == "off" and enabled:
            # Queuing stays on for a sink that had a remote (docs/forwarding.md).
            report["state"] = "queuing"
    return report

"""The forwarding part of ``mplp-lsp status`` and of the ``mplp/status`` notification."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from mplp_lsp.forward.outbox import read_state

__all__ = ["forward_status"]


def forward_status(
    conn: sqlite3.Connection, runtime: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Outbox depth, oldest pending age, last success and error, and every counter.

    ``runtime`` is what the running forwarder adds (state, remote); without it (the CLI
    reading a store) the state is what the store says. None for a store without an outbox.
    """
    try:
        state = read_state(conn)
    except sqlite3.OperationalError:  # a store written before forwarding existed
        return None
    age = None
    if state.oldest_pending_at is not None:
        oldest = datetime.fromisoformat(state.oldest_pending_at.replace("Z", "+00:00"))
        age = max(0.0, round((datetime.now(UTC) - oldest).total_seconds(), 3))
    report: dict[str, Any] = {
        "enabled": state.enabled,
        "state": "queuing" if state.enabled else "off",
        "remote": None,
        "queued_for": state.queued_for,
        "held": state.held,
        "depth": state.pending,
        "pending_bytes": state.pending_bytes,
        "budget_bytes": state.budget_bytes,
        "oldest_pending_age_s": age,
        "last_success_at": state.last_success_at,
        "last_error": state.last_error,
        "last_error_at": state.last_error_at,
        "delivered": state.delivered,
        "dead_lettered": state.dead_lettered,
        "dead_letters": state.dead_letters,
        "overflow_dropped": state.overflow_dropped,
        "quarantined": state.quarantined,
        "batches_sent": state.batches_sent,
        "failed_attempts": state.failed_attempts,
    }
    if runtime is not None:
        report.update(runtime)
        if runtime.get("state") == "off" and state.enabled:
            # Queuing stays on for a store that had a remote (docs/forwarding.md).
            report["state"] = "queuing"
    return report

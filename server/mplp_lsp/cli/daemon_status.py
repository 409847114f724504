"""A running daemon's own view of its workspace, for ``mplp-lsp status``.

The store tells counts and counters; only the daemon knows what its forwarder is doing
now (sending, waiting out a backoff) and which remote it sends to. ``GET /status`` on the
daemon's loopback API answers with both.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from mplp_lsp.api.client import ApiUnanswered, get_json
from mplp_lsp.api.endpoint import ApiRefused, Endpoint, daemon_api
from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.engine.status import WorkspaceStatus

__all__ = ["daemon_status", "without_live_state"]

# A daemon busy committing a burst answers in tens of milliseconds; one that does not answer
# within this is reported from the store alone rather than holding the command.
_ASK_TIMEOUT: Final = 3.0
_FIELDS: Final = frozenset(field.name for field in dataclasses.fields(WorkspaceStatus))


def daemon_status(paths: StatePaths, endpoint: Endpoint) -> WorkspaceStatus | None:
    """The status the daemon behind ``endpoint`` reports; None if it cannot be asked.

    The token (the state dir's own) goes only to a loopback address, whatever the endpoint
    file says.
    """
    try:
        url, token = daemon_api(paths, endpoint)
        report = get_json(url, "/status", token, _ASK_TIMEOUT)
    except (OSError, ValueError, ApiUnanswered, ApiRefused):
        return None
    if not isinstance(report, dict):
        return None
    try:  # a daemon of another version may report fields this one does not know
        return WorkspaceStatus(**{name: value for name, value in report.items() if name in _FIELDS})
    except TypeError:
        return None


def without_live_state(status: WorkspaceStatus) -> WorkspaceStatus:
    """``status`` read from the store of a running daemon that could not be asked.

    The store cannot tell what the daemon's forwarder is doing, so its state is "unknown"
    rather than the "queuing" that a store without a running daemon means.
    """
    if status.forward is None or not status.forward["enabled"]:
        return status
    return dataclasses.replace(status, forward={**status.forward, "state": "unknown"})

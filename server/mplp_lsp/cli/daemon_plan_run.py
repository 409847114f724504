"""``flow run`` beside a running daemon: the plan goes to its loopback API and runs there.

The daemon owns the store (one writer per store), so the plan runs in it:
``POST /psg/plans/{plan_id}/run`` with the documents in the body, and the NDJSON stream it
answers with is printed as it arrives, by the same printer a run in this process uses.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

from mplp_lsp.cli.plan_run_output import EXIT_REFUSED, RunPrinter

if TYPE_CHECKING:
    from mplp_lsp.api.endpoint import Endpoint
    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.plans.runs import PlanRunRequest

# Connecting to a loopback port is immediate; the run itself may take as long as its steps.
_CONNECT_TIMEOUT: Final = 10.0


def run_in_daemon(
    daemon: tuple[StatePaths, Endpoint, dict[str, Any]],
    request: PlanRunRequest,
    plan_id: str,
    printer: RunPrinter,
) -> int:
    from mplp_lsp.api.client import ApiUnanswered, post_for_lines
    from mplp_lsp.api.endpoint import ApiRefused, daemon_api

    paths, endpoint, owner = daemon
    who = f"the daemon (pid {owner.get('pid')}) that owns this workspace's store"
    try:
        url, token = daemon_api(paths, endpoint)
    except (ApiRefused, OSError) as refused:
        print(f"mplp-lsp flow run: {who} cannot be asked: {refused}", file=sys.stderr)
        return EXIT_REFUSED
    ending: list[dict[str, Any]] = []

    def line(item: dict[str, Any]) -> None:
        if "event" in item:
            printer.events([item["event"]])
        else:
            ending.append(item)

    try:
        status, refusal = post_for_lines(
            url,
            f"/psg/plans/{plan_id}/run",
            token,
            request.to_json(),
            _CONNECT_TIMEOUT,
            line,
        )
        if status != 200:  # refused before the run wrote anything
            if not isinstance(refusal, dict) or "errors" not in refusal:
                raise ValueError(f"HTTP {status}")
            return printer.result({"refused": refusal})
        if not ending:
            raise ValueError("the run's stream ended before its result (the daemon stopped?)")
        return printer.result(ending[-1])
    except (OSError, ValueError, ApiUnanswered) as error:
        print(f"mplp-lsp flow run: {who} did not run the plan: {error}", file=sys.stderr)
        return EXIT_REFUSED

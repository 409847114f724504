"""What ``flow run`` prints and the exit status it ends with, the same whether the plan ran in
this process (cli/flow.py) or in a daemon (cli/daemon_plan_run.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, Final

EXIT_COMPLETED: Final = 0
EXIT_FAILED: Final = 1
EXIT_REFUSED: Final = 2


class RunPrinter:
    """The terminal output of a run, the same whichever process ran it."""

    def __init__(self, as_json: bool) -> None:
        self._json = as_json

    def events(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            envelope = event["envelope"]
            if self._json:
                print(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")), flush=True)
            else:
                line = f"{envelope['timestamp']}  {event['kind']:<18} {envelope['event_type']}"
                print(line, flush=True)

    def result(self, ending: dict[str, Any]) -> int:
        """Print ``{"result": ...}`` or ``{"refused": ...}``; the exit status it means."""
        if "refused" in ending:
            print(json.dumps(ending["refused"]), file=sys.stderr)
            return EXIT_REFUSED
        summary = ending["result"]
        print(
            json.dumps(summary, ensure_ascii=False), file=sys.stderr if self._json else sys.stdout
        )
        return EXIT_COMPLETED if summary["success"] else EXIT_FAILED

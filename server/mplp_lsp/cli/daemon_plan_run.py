"""``flow run`` beside a running daemon: the plan goes to its loopback API and runs there.

The daemon owns the store (one writer per store), so the plan runs in it:
``POST /psg/plans/{plan_id}/run`` with the documents in the body, and the NDJSON stream it
answers with is printed as it arrives, by the same printer a run in this process uses.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mplp_lsp.api.endpoint import Endpoint
    from mplp_lsp.cli.flow import RunPrinter
    from mplp_lsp.runtime.plan_runs import PlanRunRequest

EXIT_REFUSED: Final = 2
# Connecting to a loopback port is immediate; the run itself may take as long as its steps.
_CONNECT_TIMEOUT: Final = 10.0
_CHUNK: Final = 64 * 1024


def run_in_daemon(
    daemon: tuple[Endpoint, dict[str, Any]],
    request: PlanRunRequest,
    plan_id: str,
    printer: RunPrinter,
) -> int:
    import aiohttp

    endpoint, owner = daemon
    who = f"the daemon (pid {owner.get('pid')}) that owns this workspace's store"
    if not endpoint.is_loopback():
        print(f"mplp-lsp flow run: {who} names a non-loopback API address", file=sys.stderr)
        return EXIT_REFUSED
    try:
        token = Path(endpoint.token_file).read_text(encoding="utf-8").strip()
        return asyncio.run(_post(endpoint.url, token, request, plan_id, printer))
    except (OSError, ValueError, aiohttp.ClientError, TimeoutError) as error:
        print(f"mplp-lsp flow run: {who} did not run the plan: {error}", file=sys.stderr)
        return EXIT_REFUSED


async def _post(
    url: str, token: str, request: PlanRunRequest, plan_id: str, printer: RunPrinter
) -> int:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_TIMEOUT)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(timeout=timeout, headers=headers) as session,
        session.post(f"{url}/psg/plans/{plan_id}/run", json=request.to_json()) as response,
    ):
        if response.status != 200:  # refused before the run wrote anything
            body = await response.json(content_type=None)
            if not isinstance(body, dict) or "errors" not in body:
                raise ValueError(f"HTTP {response.status}")
            return printer.result({"refused": body})
        ending: dict[str, Any] | None = None
        pending = b""
        async for chunk in response.content.iter_chunked(_CHUNK):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                item = json.loads(line)
                if "event" in item:
                    printer.events([item["event"]])
                else:
                    ending = item
        if ending is None:
            raise ValueError("the run's stream ended before its result (the daemon stopped?)")
        return printer.result(ending)

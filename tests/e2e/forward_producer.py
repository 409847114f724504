"""A daemon-like process for the forwarding tests: a Workspace forwarding to a remote.

    python forward_producer.py produce|drain|crash-after-2xx STATE_DIR WORKSPACE URL [N]

``produce`` submits N file_update events through the intake in slices and prints the ids
of each slice once ``submit_many`` returned (acknowledged = committed), then waits for the
outbox to drain. ``drain`` only waits for the drain. ``crash-after-2xx`` kills itself with
SIGKILL right after the first 2xx answer, before the outbox can record it. Each mode prints
``DRAINED`` when the outbox is empty. The token comes from MPLP_LSP_REMOTE_TOKEN.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from mplp_lsp.config.settings import parse_settings
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.forward.sender import HttpTransport
from mplp_lsp.protocol.kinds import Kind

SLICE = 250
FAST = {"forwardRetryInitialMs": 5, "forwardRetryMaxMs": 100, "forwardLingerMs": 2}


def crash_after_first_2xx() -> None:
    send = HttpTransport.send

    async def send_then_die(self: HttpTransport, batch: object) -> object:
        reply = await send(self, batch)  # type: ignore[arg-type]
        if 200 <= reply.status < 300:
            print(f"CRASH {len(batch.entries)}", flush=True)  # type: ignore[attr-defined]
            os.kill(os.getpid(), signal.SIGKILL)
        return reply

    HttpTransport.send = send_then_die  # type: ignore[assignment,method-assign]


async def main(mode: str, state_dir: str, root: str, url: str, count: int) -> None:
    if mode == "crash-after-2xx":
        crash_after_first_2xx()
    settings, _ = parse_settings(FAST)
    workspace = await Workspace.open(Path(root), settings, state_dir=state_dir, remote_url=url)
    print("READY", flush=True)
    if mode in ("produce", "crash-after-2xx"):
        for start in range(0, count, SLICE):
            submissions = [
                Submission(
                    Kind.FILE_UPDATE,
                    {
                        "file_path": f"src/f{n}.py",
                        "change_type": "modified",
                        "timestamp": "2026-03-02T08:01:00.000Z",
                        "lines_added": n,
                    },
                    "ide",
                )
                for n in range(start, min(count, start + SLICE))
            ]
            results = await workspace.intake.submit_many(submissions)
            ids = [r.event.event_id for r in results if r.event is not None]
            print("ACK " + " ".join(ids), flush=True)
    while (await workspace.status()).forward["depth"]:  # type: ignore[index]
        await asyncio.sleep(0.02)
    print("DRAINED", flush=True)
    await workspace.close()


if __name__ == "__main__":
    mode, state_dir, root, url = sys.argv[1:5]
    asyncio.run(main(mode, state_dir, root, url, int(sys.argv[5]) if len(sys.argv) > 5 else 0))

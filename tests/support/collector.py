"""A real `mplp-lsp collector serve` process (SQLite) on 127.0.0.1, and its token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

SERVER = Path(__file__).resolve().parents[2] / "server"


TOKEN = "test-token-0123456789"


def child_env() -> dict[str, str]:
    env = dict(os.environ, MPLP_LSP_REMOTE_TOKEN=TOKEN, MPLP_LSP_COLLECTOR_TOKEN=TOKEN)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER), env.get("PYTHONPATH")]))
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Collector:
    """A real ``mplp-lsp collector serve`` process."""

    def __init__(self, db: Path, port: int = 0) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mplp_lsp",
                "collector",
                "serve",
                "--port",
                str(port),
                "--db",
                str(db),
                "--log-level",
                "warning",
            ],
            env=child_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        assert "listening on" in line, line
        self.url = line.split()[3]

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def events(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.get(f"/events?after={after}&limit=10000")
            found += page["events"]
            if page["next"] is None:
                return found
            after = page["next"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

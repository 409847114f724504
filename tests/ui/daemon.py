"""Real processes for the dashboard tests: a `mplp-lsp watch` daemon, the CLI, a remote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until

REMOTE_TOKEN = "remote-secret-for-tests"


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-m", "mplp_lsp", *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )


@dataclass
class Watch:
    """A running `mplp-lsp watch` on a workspace, its printed lines collected."""

    workspace: Path
    state_dir: Path
    process: subprocess.Popen[str]
    env: dict[str, str]
    lines: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, workspace: Path, state_dir: Path, env: dict[str, str], *extra: str) -> Watch:
        process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-m",
                "mplp_lsp",
                "watch",
                "--state-dir",
                str(state_dir),
                *extra,
                str(workspace),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        watch = cls(workspace, state_dir, process, env)
        threading.Thread(target=watch._read, daemon=True).start()
        wait_until(lambda: watch.printed("HTTP API on"), what="the watcher ready")
        return watch

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def printed(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    @property
    def url(self) -> str:
        return str(json.loads((self.state_dir / "api.json").read_text())["url"])

    def get(self, path: str) -> Any:
        """GET ``path`` with the bearer token, as a script would."""
        token = (self.state_dir / "api-token").read_text()
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict[str, Any], method: str = "POST") -> Any:
        """POST JSON to ``path`` with the bearer token, as a CI script would."""
        token = (self.state_dir / "api-token").read_text()
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.post(path, body, method="PATCH")

    def login_link(self) -> str:
        """What `mplp-lsp ui` prints for this workspace (a real CLI process)."""
        done = cli(
            self.env, "ui", "--state-dir", str(self.state_dir), "--workspace", str(self.workspace)
        )
        return done.stdout.strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Remote:
    """A remote runtime on 127.0.0.1 that answers every batch with ``status``."""

    def __init__(self) -> None:
        self.status = 403
        self.stored: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                accepted = self.headers.get("Authorization") == f"Bearer {REMOTE_TOKEN}"
                status = owner.status if accepted else 401
                if 200 <= status < 300:
                    owner.stored += json.loads(body)["items"]
                payload = b"{}" if status < 300 else b'{"error": "refused by the test remote"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPLP_LSP_")}
    env.update(
        MPLP_LSP_REMOTE_TOKEN=REMOTE_TOKEN,
        GIT_AUTHOR_NAME="Ada",
        GIT_AUTHOR_EMAIL="ada@example.com",
        GIT_COMMITTER_NAME="Ada",
        GIT_COMMITTER_EMAIL="ada@example.com",
        XDG_STATE_HOME=str(home / "state-home"),
    )
    return env

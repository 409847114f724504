"""`mplp-lsp serve` spoken to byte by byte, the way clients other than pytest-lsp speak: with the
`--stdio` that many of them append, and requests that leave `params` out (JSON-RPC allows it;
vscode-jsonrpc does it for a request sent without parameters)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

pytestmark = pytest.mark.e2e


def send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    pipe.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    pipe.flush()


def answer(pipe: IO[bytes], request_id: int) -> dict[str, Any]:
    """The response to ``request_id``; notifications and server requests before it are skipped."""
    while True:
        length = 0
        while (line := pipe.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not length:
            raise EOFError("the server closed its output")
        message: dict[str, Any] = json.loads(pipe.read(length))
        if message.get("id") == request_id and "method" not in message:
            return message


def test_serve_accepts_stdio_and_a_status_request_without_params(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    server = subprocess.Popen(
        [sys.executable, "-I", "-m", "mplp_lsp", "serve", "--stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "MPLP_LSP_STATE_DIR": str(tmp_path / "state")},
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        send(
            server.stdin,
            {
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}},
            },
        )
        assert "capabilities" in answer(server.stdout, 1)["result"]
        send(server.stdin, {"method": "initialized", "params": {}})
        send(server.stdin, {"id": 2, "method": "mplp/status"})  # no "params" at all
        status = answer(server.stdout, 2)
        assert "error" not in status, status
        assert status["result"]["version"]
        send(server.stdin, {"id": 3, "method": "shutdown"})
        answer(server.stdout, 3)
        send(server.stdin, {"method": "exit"})
        _, stderr = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0
    assert b"Traceback" not in stderr, stderr.decode()

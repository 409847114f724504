"""`mplp-lsp serve` spoken to byte by byte, the way clients other than pytest-lsp speak: with the
`--stdio` that many of them append, and requests that leave `params` out (JSON-RPC allows it;
vscode-jsonrpc does it for a request sent without parameters)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from tests.e2e.harness import read_events

pytestmark = pytest.mark.e2e


def send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    pipe.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    pipe.flush()


def answer(pipe: IO[bytes], request_id: int, seen: list[Any] | None = None) -> dict[str, Any]:
    """The response to ``request_id``; notifications and server requests before it are skipped
    (``seen`` collects the ids of the responses read)."""
    while True:
        length = 0
        while (line := pipe.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not length:
            raise EOFError("the server closed its output")
        message: dict[str, Any] = json.loads(pipe.read(length))
        if "method" not in message and seen is not None:
            seen.append(message.get("id"))
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


# -- the answer to initialize kept from an earlier start (lsp/handshake.py) --------------------

# What VS Code's client says of the parts the answer depends on.
CAPABILITIES = {
    "general": {"positionEncodings": ["utf-16"]},
    "textDocument": {"synchronization": {"willSave": True, "didSave": True}},
    "workspace": {"workspaceFolders": True, "fileOperations": {"didRename": True}},
}


def serve_once(tmp_path: Path, cache: Path) -> tuple[dict[str, Any], bytes]:
    """One session: initialize, a status request, shutdown and exit; the answer to
    initialize and the server's log."""
    workspace = tmp_path / "project"
    workspace.mkdir(exist_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-I", "-m", "mplp_lsp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "MPLP_LSP_STATE_DIR": str(tmp_path / "state"),
            "MPLP_LSP_CACHE_DIR": str(cache),
        },
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        params = {"processId": None, "rootUri": workspace.as_uri(), "capabilities": CAPABILITIES}
        send(server.stdin, {"id": 1, "method": "initialize", "params": params})
        seen: list[Any] = []
        result: dict[str, Any] = answer(server.stdout, 1, seen)["result"]
        send(server.stdin, {"method": "initialized", "params": {}})
        # The server took the initialize too: it records the folder it named.
        status = ready(server, seen)
        assert [folder["root"] for folder in status["workspaces"]] == [str(workspace.resolve())]
        send(server.stdin, {"id": 0, "method": "shutdown"})
        answer(server.stdout, 0, seen)
        send(server.stdin, {"method": "exit"})
        _, stderr = server.communicate(timeout=30)
        assert sorted(seen) == sorted(set(seen)), seen  # one answer to each request
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr, stderr.decode()
    return result, stderr


def ready(server: subprocess.Popen[bytes], seen: list[Any] | None = None) -> dict[str, Any]:
    """The server's status once it records its folders (or after 60 s)."""
    assert server.stdin is not None and server.stdout is not None
    deadline = time.monotonic() + 60
    for ident in itertools.count(1000):
        send(server.stdin, {"id": ident, "method": "mplp/status"})
        status: dict[str, Any] = answer(server.stdout, ident, seen)["result"]
        if status["ready"] or time.monotonic() > deadline:
            return status
        time.sleep(0.1)
    raise AssertionError("unreachable")


def kept_answers(cache: Path) -> list[Path]:
    return sorted((cache / "initialize").glob("*.json"))


def test_a_later_start_answers_as_the_first_did_from_the_answer_it_kept(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, _ = serve_once(tmp_path, cache)
    [kept] = kept_answers(cache)
    assert kept.stat().st_mode & 0o077 == 0  # the user's own
    second, _ = serve_once(tmp_path, cache)
    assert second == first
    assert first["capabilities"]["textDocumentSync"]["willSave"] is True
    assert kept_answers(cache) == [kept]


def test_a_kept_answer_is_what_the_editor_gets_and_one_that_differs_is_dropped(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    server_answer, _ = serve_once(tmp_path, cache)
    [kept] = kept_answers(cache)
    data = json.loads(kept.read_text())
    data["result"]["capabilities"]["experimental"] = {"kept": True}
    kept.write_text(json.dumps(data))
    early, log = serve_once(tmp_path, cache)
    assert early["capabilities"]["experimental"] == {"kept": True}  # answered from the file
    assert b"differed from this server's" in log
    assert kept_answers(cache) == []
    again, _ = serve_once(tmp_path, cache)
    assert again == server_answer and len(kept_answers(cache)) == 1


def test_a_kept_answer_others_could_change_is_not_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    server_answer, _ = serve_once(tmp_path, cache)
    [kept] = kept_answers(cache)
    data = json.loads(kept.read_text())
    data["result"]["capabilities"]["experimental"] = {"kept": True}
    kept.write_text(json.dumps(data))
    kept.chmod(0o664)
    answered, _ = serve_once(tmp_path, cache)
    assert answered == server_answer


def test_an_exit_sent_before_shutdown_is_answered_loses_no_save_and_logs_no_traceback(
    tmp_path: Path,
) -> None:
    """eglot waits 1.5 s for the answer to shutdown, then sends exit anyway."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    source = workspace / "a.py"
    source.write_text("x = 1\n")
    state = tmp_path / "state"
    server = subprocess.Popen(
        [sys.executable, "-I", "-m", "mplp_lsp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "MPLP_LSP_STATE_DIR": str(state),
            "MPLP_LSP_CACHE_DIR": str(tmp_path / "cache"),
        },
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        params: dict[str, Any] = {
            "processId": None,
            "rootUri": workspace.as_uri(),
            "capabilities": {},
        }
        send(server.stdin, {"id": 1, "method": "initialize", "params": params})
        answer(server.stdout, 1)
        send(server.stdin, {"method": "initialized", "params": {}})
        ready(server)
        document = {"uri": source.as_uri(), "languageId": "python", "version": 1, "text": "x = 1\n"}
        send(server.stdin, {"method": "textDocument/didOpen", "params": {"textDocument": document}})
        source.write_text("x = 2\n")
        saved = {"textDocument": {"uri": source.as_uri()}}
        send(server.stdin, {"method": "textDocument/didSave", "params": saved})
        send(server.stdin, {"id": 2, "method": "shutdown"})
        send(server.stdin, {"method": "exit"})
        _, stderr = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert b"Traceback" not in stderr, stderr.decode()
    changes = [
        (e["payload"]["file_path"], e["payload"]["change_type"])
        for e in read_events(state, "file_update")
    ]
    assert ("a.py", "modified") in changes

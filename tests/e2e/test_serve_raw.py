"""`mplp-lsp serve` spoken to byte by byte, the way clients other than pytest-lsp speak: with the
`--stdio` that many of them append, and requests that leave `params` out (JSON-RPC allows it;
vscode-jsonrpc does it for a request sent without parameters)."""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
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


@contextlib.contextmanager
def serving(tmp_path: Path, cache: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``serve`` on stdio, its store in ``tmp_path/state`` and its kept answers in
    ``cache``; killed at the end if it is still running."""
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
    try:
        yield server
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()


def begin(
    server: subprocess.Popen[bytes],
    workspace: Path,
    capabilities: dict[str, Any],
    seen: list[Any] | None = None,
) -> dict[str, Any]:
    """initialize (its result is returned) and initialized; then the server's status once
    it records ``workspace``: the server took the initialize too."""
    assert server.stdin is not None and server.stdout is not None
    params = {"processId": None, "rootUri": workspace.as_uri(), "capabilities": capabilities}
    send(server.stdin, {"id": 1, "method": "initialize", "params": params})
    result: dict[str, Any] = answer(server.stdout, 1, seen)["result"]
    send(server.stdin, {"method": "initialized", "params": {}})
    status = ready(server, seen)
    assert [folder["root"] for folder in status["workspaces"]] == [str(workspace.resolve())]
    return result


def serve_once(tmp_path: Path, cache: Path) -> tuple[dict[str, Any], bytes]:
    """One session: initialize, a status request, shutdown and exit; the answer to
    initialize and the server's log."""
    workspace = tmp_path / "project"
    workspace.mkdir(exist_ok=True)
    with serving(tmp_path, cache) as server:
        assert server.stdin is not None and server.stdout is not None
        seen: list[Any] = []
        result = begin(server, workspace, CAPABILITIES, seen)
        send(server.stdin, {"id": 0, "method": "shutdown"})
        answer(server.stdout, 0, seen)
        send(server.stdin, {"method": "exit"})
        _, stderr = server.communicate(timeout=30)
        assert sorted(seen) == sorted(set(seen)), seen  # one answer to each request
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


def served_and_marked(tmp_path: Path, cache: Path) -> tuple[dict[str, Any], Path]:
    """A first session's answer, and the file it kept, now carrying a mark the server's own
    answer does not have (what the editor gets shows where its answer came from)."""
    server_answer, _ = serve_once(tmp_path, cache)
    [kept] = kept_answers(cache)
    data = json.loads(kept.read_text())
    data["result"]["capabilities"]["experimental"] = {"kept": True}
    kept.write_text(json.dumps(data))
    return server_answer, kept


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
    server_answer, _ = served_and_marked(tmp_path, cache)
    early, log = serve_once(tmp_path, cache)
    assert early["capabilities"]["experimental"] == {"kept": True}  # answered from the file
    assert b"differed from this server's" in log
    assert kept_answers(cache) == []
    again, _ = serve_once(tmp_path, cache)
    assert again == server_answer and len(kept_answers(cache)) == 1


def test_a_kept_answer_others_could_change_is_not_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    server_answer, kept = served_and_marked(tmp_path, cache)
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
    with serving(tmp_path, tmp_path / "cache") as server:
        assert server.stdin is not None
        begin(server, workspace, {})
        document = {"uri": source.as_uri(), "languageId": "python", "version": 1, "text": "x = 1\n"}
        send(server.stdin, {"method": "textDocument/didOpen", "params": {"textDocument": document}})
        source.write_text("x = 2\n")
        saved = {"textDocument": {"uri": source.as_uri()}}
        send(server.stdin, {"method": "textDocument/didSave", "params": saved})
        send(server.stdin, {"id": 2, "method": "shutdown"})
        send(server.stdin, {"method": "exit"})
        _, stderr = server.communicate(timeout=30)
    assert b"Traceback" not in stderr, stderr.decode()
    events = read_events(tmp_path / "state", "file_update")
    changes = [(e["payload"]["file_path"], e["payload"]["change_type"]) for e in events]
    assert ("a.py", "modified") in changes


@pytest.mark.parametrize("shutdown", [True, False], ids=["after-shutdown", "without-shutdown"])
def test_exit_ends_with_the_status_lsp_asks_for_and_stores_what_was_saved(
    tmp_path: Path, shutdown: bool
) -> None:
    """0 when a shutdown came before the exit, 1 otherwise (an editor that crashed or gave
    up): either way the save reported before it is stored."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    source = workspace / "a.py"
    source.write_text("x = 1\n")
    with serving(tmp_path, tmp_path / "cache") as server:
        assert server.stdin is not None and server.stdout is not None
        begin(server, workspace, {})
        source.write_text("x = 2\n")
        saved = {"textDocument": {"uri": source.as_uri()}}
        send(server.stdin, {"method": "textDocument/didSave", "params": saved})
        if shutdown:
            send(server.stdin, {"id": 2, "method": "shutdown"})
            answer(server.stdout, 2)
        send(server.stdin, {"method": "exit"})
        _, stderr = server.communicate(timeout=30)
    assert server.returncode == (0 if shutdown else 1), stderr.decode()
    assert b"Traceback" not in stderr, stderr.decode()
    events = read_events(tmp_path / "state", "file_update")
    assert ("a.py", "modified") in [
        (e["payload"]["file_path"], e["payload"]["change_type"]) for e in events
    ]

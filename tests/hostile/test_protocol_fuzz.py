"""Fuzzing a real ``mplp-lsp serve`` over stdio: JSON-RPC framing and LSP params.

Requests with generated params must each get an answer (a result, or an error with an
integer code) and the server must stay up; broken framing must end in a clean exit when the
editor goes away, never a hang or a traceback.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.properties import examples

pytestmark = pytest.mark.e2e
SERVER = Path(__file__).resolve().parents[2] / "server"
ANSWER_TIMEOUT = 20.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER), env.get("PYTHONPATH")]))
    env.pop("MPLP_LSP_STATE_DIR", None)
    return env


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class Server:
    def __init__(self, state: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mplp_lsp", "serve", "--state-dir", str(state), "--no-api"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self._next = 0

    def _read(self) -> None:
        out = self.process.stdout
        assert out is not None
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = out.read(1)
                if not byte:
                    return
                header += byte
            length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
            message = json.loads(out.read(length))
            if "id" in message and "method" in message:  # a request from the server
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "id" in message:
                self.messages.put(message)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr += line

    def send(self, message: Any) -> None:
        self.write(frame(json.dumps(message).encode()))

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def request(self, method: str, params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            message = self.messages.get(timeout=ANSWER_TIMEOUT)
            if message.get("id") == ident:
                return message

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("fuzz")
    workspace = base / "ws"
    workspace.mkdir()
    running = Server(base / "state")
    reply = running.request(
        "initialize",
        {
            "processId": None,
            "rootUri": workspace.as_uri(),
            "capabilities": {},
            "workspaceFolders": [{"uri": workspace.as_uri(), "name": "ws"}],
        },
    )
    assert "result" in reply
    running.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    yield running
    running.request("shutdown", None)
    running.send({"jsonrpc": "2.0", "method": "exit"})
    assert running.process.wait(30) == 0
    assert own_tracebacks(running.stderr) == []


def own_tracebacks(stderr: bytes) -> list[str]:
    """Tracebacks through this project's code, except pygls's own parse errors: pygls logs a
    message it could not structure (answered, when it was a request, with -32602/-32603)
    with a traceback that passes through our protocol class. Those are not crashes."""
    text = stderr.decode(errors="replace")
    blocks = text.split("Traceback (most recent call last):")[1:]
    return [
        block[:2000] for block in blocks if _OWN_FRAME.search(block) and _PARSE_ERROR not in block
    ]


_OWN_FRAME = re.compile(r'File "[^"]*/mplp_lsp/')
_PARSE_ERROR = "pygls.exceptions.JsonRpc"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
URIS = st.sampled_from(
    [
        "file:///etc/passwd",
        "file:///ws/../../x",
        "http://x/y",
        "",
        "file://host/x",
        "%00",
        "file:///",
    ]
) | st.text(max_size=30)
TEXT_DOCUMENT = st.fixed_dictionaries({"uri": URIS}, optional={"version": JSON, "text": JSON})
LSP_PARAMS = st.one_of(
    JSON,
    st.fixed_dictionaries({"textDocument": TEXT_DOCUMENT}, optional={"contentChanges": JSON}),
    st.fixed_dictionaries(
        {"changes": st.lists(st.fixed_dictionaries({"uri": URIS, "type": JSON}), max_size=4)}
    ),
    st.fixed_dictionaries(
        {"files": st.lists(st.fixed_dictionaries({"oldUri": URIS, "newUri": URIS}), max_size=3)}
    ),
)
REQUESTS = st.sampled_from(
    [
        "mplp/status",
        "mplp/psg/get",
        "mplp/psg/query",
        "mplp/drift/check",
        "textDocument/codeAction",
        "textDocument/hover",
        "workspace/executeCommand",
        "workspace/willRenameFiles",
        "no/such/method",
    ]
)
NOTIFICATIONS = st.sampled_from(
    [
        "textDocument/didOpen",
        "textDocument/didChange",
        "textDocument/didSave",
        "textDocument/didClose",
        "workspace/didChangeWatchedFiles",
        "workspace/didRenameFiles",
        "workspace/didDeleteFiles",
        "workspace/didCreateFiles",
        "workspace/didChangeConfiguration",
        "workspace/didChangeWorkspaceFolders",
        "$/cancelRequest",
        "no/such/notification",
    ]
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    notifications=st.lists(st.tuples(NOTIFICATIONS, LSP_PARAMS), max_size=4),
    method=REQUESTS,
    params=LSP_PARAMS,
)
def test_generated_messages_get_structured_answers(
    server: Server, notifications: list[tuple[str, Any]], method: str, params: Any
) -> None:
    for name, body in notifications:
        server.send({"jsonrpc": "2.0", "method": name, "params": body})
    reply = server.request(method, params)
    if "error" in reply:
        assert isinstance(reply["error"]["code"], int)
        assert isinstance(reply["error"]["message"], str)
    else:
        assert "result" in reply
    assert server.process.poll() is None
    status = server.request("mplp/status", None)
    assert "result" in status, status


FRAMES = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=200).map(frame),
    st.sampled_from(
        [
            b"Content-Length: -5\r\n\r\n{}",
            b"Content-Length: abc\r\n\r\n{}",
            b"Content-Length: 99999999999999999999\r\n\r\n{}",
            b"Content-Length: 10\r\n\r\n{}",
            b"Content-Type: x\r\n\r\n{}",
            frame(b"\xff\xfe\xfd"),
            frame(b"[]"),
            frame(b"null"),
            frame(b'{"jsonrpc": "2.0", "id": {}, "method": 5}'),
            frame(b'{"jsonrpc": "1.0", "id": 1, "method": "initialize"}'),
            frame(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": []}'),
            frame(b"[" * 100_000),
            b"\r\n" * 1000,
        ]
    ),
)


@settings(max_examples=examples(5), deadline=None, suppress_health_check=list(HealthCheck))
@given(garbage=st.lists(FRAMES, min_size=1, max_size=3))
def test_broken_framing_never_hangs_or_crashes(
    tmp_path_factory: pytest.TempPathFactory, garbage: list[bytes]
) -> None:
    running = Server(tmp_path_factory.mktemp("frames") / "state")
    try:
        for chunk in garbage:
            running.write(chunk)
        code = running.close()  # the editor goes away: the server must notice and exit
    finally:
        if running.process.poll() is None:
            running.process.kill()
    assert code in (0, 1), code
    assert own_tracebacks(running.stderr) == []

"""The server's life cycle: what it sends when, how it ends, and what it survives."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import LanguageClient

from benchlib.jsonrpc_client import RawClient
from tests.e2e.harness import lsp_session, read_events, server_env, watch_argv


def serve_cmd(state_dir: Path) -> list[str]:
    return [sys.executable, "-m", "mplp_lsp", "serve", "--state-dir", str(state_dir)]


async def wait_exit(process: asyncio.subprocess.Process, timeout: float = 15.0) -> int:
    return await asyncio.wait_for(process.wait(), timeout)


async def test_nothing_is_sent_before_initialized(workspace: Path, state_dir: Path) -> None:
    client = RawClient()
    await client.start(*serve_cmd(state_dir), env=server_env())
    await client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": workspace.as_uri(),
            "capabilities": {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}},
        },
    )
    await asyncio.sleep(1.0)
    assert client.notifications == []
    client.notify("initialized", {})
    for _ in range(100):
        status = await client.request("mplp/status")
        if status["ready"]:
            break
        await asyncio.sleep(0.05)
    assert status["ready"]
    await client.stop()


async def test_stdin_eof_commits_pending_activity_and_exits(
    workspace: Path, state_dir: Path
) -> None:
    client = RawClient()
    await client.start(*serve_cmd(state_dir), env=server_env())
    await client.initialize(
        workspace.as_uri(), {"mplp": {"debounceMs": 60_000, "maxWaitMs": 60_000}}
    )
    while not (await client.request("mplp/status"))["ready"]:
        await asyncio.sleep(0.05)
    (workspace / "src" / "late.py").write_text("x\n")
    client.notify(
        "textDocument/didSave", {"textDocument": {"uri": (workspace / "src" / "late.py").as_uri()}}
    )
    await client.request("mplp/status")  # the save has been taken in (a minute from settling)
    assert client.process is not None and client.process.stdin is not None
    client.process.stdin.close()
    assert await wait_exit(client.process) == 0
    assert [e["payload"]["file_path"] for e in read_events(state_dir, "file_update")] == [
        "src/late.py"
    ]


async def test_the_server_stops_when_the_editor_dies(workspace: Path, state_dir: Path) -> None:
    editor = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)"
    )
    client = RawClient()
    await client.start(*serve_cmd(state_dir), env=server_env())
    await client.request(
        "initialize", {"processId": editor.pid, "rootUri": workspace.as_uri(), "capabilities": {}}
    )
    client.notify("initialized", {})
    while not (await client.request("mplp/status"))["ready"]:
        await asyncio.sleep(0.05)
    editor.kill()
    await editor.wait()
    assert client.process is not None
    assert await wait_exit(client.process, timeout=20) == 0


async def test_a_bad_notification_is_logged_not_shown_and_the_server_goes_on(
    workspace: Path, state_dir: Path
) -> None:
    async with lsp_session(workspace, state_dir) as session:
        for method, params in (
            ("textDocument/didSave", {"textDocument": {"uri": 42}}),
            ("workspace/didChangeWatchedFiles", {"changes": "nope"}),
        ):
            body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode()
            writer = session.client.protocol.writer
            assert writer is not None  # the session is started: its writer is set
            writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        session.save("src/after_bad.py", "x\n")
        events = await session.wait_for_events(1)
        errors = [m for m in session.client.messages if m.type == types.MessageType.Error]
        status = await session.status()
    assert errors == []
    assert [e["payload"]["file_path"] for e in events] == ["src/after_bad.py"]
    assert status["refused"] == 1  # the uri 42 is no file: URI


async def test_a_late_configuration_reply_does_not_break_the_server(
    workspace: Path, state_dir: Path
) -> None:
    """pygls #621: a reply arriving after the server stopped waiting must be harmless."""

    def slow_client() -> LanguageClient:
        client = LanguageClient(converter_factory=default_converter)

        @client.feature(types.WORKSPACE_CONFIGURATION)
        async def configuration(params: types.ConfigurationParams) -> list[Any]:
            await asyncio.sleep(6.0)  # the server gives up after 5 s
            return [{"debounceMs": 100}] * len(params.items)

        return client

    async with lsp_session(workspace, state_dir, client_factory=slow_client) as session:
        await asyncio.sleep(1.5)  # the late reply lands now
        session.save("src/c.py", "x\n")
        events = await session.wait_for_events(1)
        status = await session.status()
    assert [e["payload"]["file_path"] for e in events] == ["src/c.py"]
    assert status["ready"]


def test_watch_records_and_prints_file_activity(workspace: Path, state_dir: Path) -> None:
    process = subprocess.Popen(
        watch_argv(workspace, state_dir, "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )
    try:
        assert process.stderr is not None and "watching" in process.stderr.readline()
        time.sleep(0.5)
        (workspace / "src" / "watched.py").write_text("x = 1\n")
        (workspace / ".git" / "ignored").write_text("no\n")
        assert process.stdout is not None
        printed = map(json.loads, process.stdout)  # from the baseline's graph_update on
        first = next(event for event in printed if event["event_family"] != "graph_update")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
    assert process.returncode == 0
    assert first["payload"]["file_path"] == "src/watched.py"
    assert first["payload"]["change_type"] in {"created", "modified"}
    stored = [e["payload"]["file_path"] for e in read_events(state_dir, "file_update")]
    assert stored == ["src/watched.py"]

"""The action execution layer against real subprocesses, files and local HTTP servers."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from mplp_lsp.actions import ActionError, reference_executor, workspace_executor
from mplp_lsp.config.settings import Settings
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import default_validator


def check_events(result_events: list[Any]) -> None:
    validator = default_validator()
    for pending in result_events:
        assert validator.validate(pending.kind, pending.data).ok, pending.data


async def test_the_reference_executor_returns_executed_and_the_action() -> None:
    result = await reference_executor().execute({"type": "noop", "note": "hello"})
    assert result["status"] == "executed"
    assert result["action"] == {"type": "noop", "note": "hello"}
    statuses = [e.data["status"] for e in result["events"]]
    assert statuses == ["running", "completed"]
    assert {e.data["execution_id"] for e in result["events"]} == {result["execution_id"]}
    check_events(result["events"])


async def test_a_malformed_action_is_a_validation_result() -> None:
    with pytest.raises(ActionError) as error:
        await reference_executor().execute({"type": "tool", "argv": "ls", "extra": 1})
    assert set(error.value.result.codes) == {"type", "extra_forbidden"}
    with pytest.raises(ActionError) as unknown:
        await reference_executor().execute({"type": "teleport"})
    assert unknown.value.result.codes == ["enum"]


async def test_tool_success_and_failure_emit_tool_events(tmp_path: Path) -> None:
    ael = workspace_executor(tmp_path)
    ok = await ael.execute({"type": "tool", "argv": [sys.executable, "-c", "print('fine')"]})
    tools = [e.data for e in ok["events"] if e.kind is Kind.TOOL]
    assert [t["status"] for t in tools] == ["running", "succeeded"]
    assert "fine" in tools[1]["output_summary"]
    check_events(ok["events"])
    with pytest.raises(ActionError) as failed:
        await ael.execute({"type": "tool", "argv": [sys.executable, "-c", "exit(5)"]})
    assert failed.value.code == "tool_failed"
    tools = [e.data for e in failed.value.events if e.kind is Kind.TOOL]
    assert tools[-1]["status"] == "failed" and tools[-1]["exit_code"] == 5
    assert failed.value.events[-1].data["status"] == "failed"
    check_events(failed.value.events)


async def test_a_tool_that_outlives_its_timeout_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    action = {"type": "tool", "argv": [sys.executable, "-c", script], "timeout_s": 0.5}
    with pytest.raises(ActionError) as error:
        await workspace_executor(tmp_path).execute(action)
    assert error.value.code == "action_timeout"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_cancelled_tool_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    task = asyncio.create_task(
        workspace_executor(tmp_path).execute(
            {"type": "tool", "argv": [sys.executable, "-c", script]}
        )
    )
    while not pid_file.exists() or not pid_file.read_text():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


async def test_file_operations_have_inverses(tmp_path: Path) -> None:
    ael = workspace_executor(tmp_path)
    (tmp_path / "keep.txt").write_bytes(b"\x00binary\xff")
    done = [
        await ael.execute({"type": "file", "op": "write", "path": "keep.txt", "content": "text"}),
        await ael.execute({"type": "file", "op": "write", "path": "d/new.txt", "content": "n"}),
        await ael.execute({"type": "file", "op": "rename", "path": "d/new.txt", "to": "moved.txt"}),
        await ael.execute({"type": "file", "op": "delete", "path": "moved.txt"}),
    ]
    changes = [
        e.data["change_type"] for r in done for e in r["events"] if e.kind is Kind.FILE_UPDATE
    ]
    assert changes == ["modified", "created", "renamed", "deleted"]
    for result in reversed(done):
        await ael.execute(result["inverse"])
    assert (tmp_path / "keep.txt").read_bytes() == b"\x00binary\xff"
    assert not (tmp_path / "d" / "new.txt").exists() and not (tmp_path / "moved.txt").exists()


async def test_file_operations_stay_inside_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    ael = workspace_executor(root)
    for path, code in (
        ("../escape.txt", "path_traversal"),
        ("link/escape.txt", "path_symlink_escape"),
        ("/etc/passwd", "path_outside_workspace"),
    ):
        with pytest.raises(ActionError) as error:
            await ael.execute({"type": "file", "op": "write", "path": path, "content": "x"})
        assert error.value.code == code, path
    assert not (tmp_path / "escape.txt").exists()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"hello": "world"})

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=503)

    answer_slow = asyncio.Event()  # set at teardown: the action times out long before

    async def slow(request: web.Request) -> web.Response:
        await answer_slow.wait()
        return web.Response()

    async def chat(request: web.Request) -> web.Response:
        seen.append({"headers": dict(request.headers), "body": await request.json()})
        body = seen[-1]["body"]
        return web.json_response(
            {
                "model": body["model"],
                "choices": [{"message": {"role": "assistant", "content": "42"}}],
                "usage": {"total_tokens": 7},
            }
        )

    app = web.Application()
    app.router.add_get("/ok", ok)
    app.router.add_get("/broken", broken)
    app.router.add_get("/slow", slow)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", seen
    answer_slow.set()
    await runner.cleanup()


async def test_http_calls(tmp_path: Path, server: tuple[str, list[Any]]) -> None:
    base, _seen = server
    ael = workspace_executor(tmp_path)
    result = await ael.execute({"type": "http", "url": f"{base}/ok"})
    assert result["output"] == {"status": 200, "json": {"hello": "world"}}
    assert [e.data["executor_kind"] for e in result["events"]] == ["external", "external"]
    with pytest.raises(ActionError) as broken:
        await ael.execute({"type": "http", "url": f"{base}/broken"})
    assert broken.value.code == "http_error"
    with pytest.raises(ActionError) as slow:
        await ael.execute({"type": "http", "url": f"{base}/slow", "timeout_s": 0.2})
    assert slow.value.code == "action_timeout"


async def test_llm_calls_use_the_settings_and_keep_the_key_out(
    tmp_path: Path, server: tuple[str, list[Any]]
) -> None:
    base, seen = server
    key_file = tmp_path / "key"
    key_file.write_text("sk-test-123456789\n")
    action = {"type": "llm", "messages": [{"role": "user", "content": "answer?"}]}
    with pytest.raises(ActionError) as unconfigured:
        await workspace_executor(tmp_path).execute(action)
    assert unconfigured.value.code == "llm_not_configured"
    settings = Settings(
        llm_endpoint_url=f"{base}/v1", llm_model="tiny", llm_api_key_file=str(key_file)
    )
    result = await workspace_executor(tmp_path, settings).execute(action)
    assert result["output"] == {"content": "42", "model": "tiny", "usage": {"total_tokens": 7}}
    assert seen[0]["headers"]["Authorization"] == "Bearer sk-test-123456789"
    assert seen[0]["body"]["messages"] == action["messages"]
    assert "sk-test" not in repr(result)
    check_events(result["events"])

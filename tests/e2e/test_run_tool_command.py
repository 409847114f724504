"""The `mplp.runTool` command over a real LSP session: a task from the settings, recorded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lsprotocol import types

from tests.e2e.harness import FAST_SETTINGS, lsp_session

CANARY = "ghp_" + "R" * 36


def plain(value: Any) -> Any:
    return {k: plain(v) for k, v in value._asdict().items()} if hasattr(value, "_asdict") else value


async def test_run_tool_runs_a_configured_task_and_records_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "pkg").mkdir(parents=True)
    script = f"import os, sys; print('cwd', os.path.basename(os.getcwd()), '{CANARY}'); sys.exit(4)"
    tools = {
        "check": {"command": [sys.executable, "-c", script], "kind": "test_runner", "cwd": "pkg"},
        "escape": {"command": [sys.executable, "-c", "pass"], "cwd": "../"},
    }
    settings = {**FAST_SETTINGS, "tools": tools}
    async with lsp_session(workspace, tmp_path / "state", settings=settings) as session:
        result = plain(
            await session.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="mplp.runTool", arguments=["check"])
            )
        )
        assert result["status"] == "failed" and result["exit_code"] == 4
        assert "cwd pkg" in result["summary"]
        assert CANARY not in result["summary"]
        missing = plain(
            await session.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="mplp.runTool", arguments=["nope"])
            )
        )
        assert missing["status"] == "refused" and "check" in missing["message"]
        escape = plain(
            await session.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="mplp.runTool", arguments=["escape"])
            )
        )
        assert escape["status"] == "refused"
        events = await session.wait_for_events(2, kind="tool")
        messages = [shown.message for shown in session.client.messages]
    statuses = [e["payload"]["status"] for e in events]
    assert statuses == ["running", "failed"]
    assert events[-1]["payload"]["working_directory"] == "pkg"
    assert {e["payload"]["invocation_id"] for e in events} == {result["invocation_id"]}
    assert any("check failed (exit 4)" in m for m in messages)

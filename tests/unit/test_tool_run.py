"""The tool wrapper core, with real child processes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import default_validator
from mplp_lsp.sources.tool_run import (
    COMMAND_NOT_FOUND,
    ToolRun,
    run_tool,
    summarise,
    tool_id_for,
    tool_name,
    workspace_relative,
)

CANARY = "ghp_" + "Z" * 36


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, payload: dict[str, Any]) -> None:
        assert default_validator().validate(Kind.TOOL, payload).ok, payload
        self.events.append(payload)


async def wrapped(tmp_path: Path, *argv: str, **kwargs: Any) -> tuple[int, Recorder, bytes, bytes]:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    recorder = Recorder()
    run = ToolRun(list(argv), cwd=tmp_path, workspace=tmp_path, **kwargs)
    try:
        status = await run_tool(run, recorder, stdout_fd=out_w, stderr_fd=err_w)
    finally:
        os.close(out_w)
        os.close(err_w)
    with os.fdopen(out_r, "rb") as out, os.fdopen(err_r, "rb") as err:
        return status, recorder, out.read(), err.read()


async def test_exit_code_is_kept_and_reported(tmp_path: Path) -> None:
    status, rec, _, _ = await wrapped(tmp_path, sys.executable, "-c", "import sys; sys.exit(3)")
    assert status == 3
    assert [e["status"] for e in rec.events] == ["running", "failed"]
    assert rec.events[1]["exit_code"] == 3
    assert rec.events[0]["invocation_id"] == rec.events[1]["invocation_id"]
    assert rec.events[1]["working_directory"] == "."
    assert rec.events[1]["started_at"] <= rec.events[1]["completed_at"]


async def test_output_passes_through_unchanged_and_is_summarised(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'line one\\n\\x1b[31mred\\x1b[0m\\n\\xff raw\\n')\n"
        f"print('token {CANARY}', file=sys.stderr)\n"
    )
    status, rec, out, err = await wrapped(tmp_path, sys.executable, "-c", code, "--kind", "x")
    assert status == 0
    assert out == b"line one\n\x1b[31mred\x1b[0m\n\xff raw\n"
    assert CANARY.encode() in err  # the user's terminal sees what the tool printed
    end = rec.events[-1]
    assert end["status"] == "succeeded"
    assert CANARY not in end["output_summary"]
    assert "[REDACTED" in end["output_summary"]
    assert "\x1b" not in end["output_summary"]
    assert "red" in end["output_summary"]


async def test_secret_arguments_are_redacted(tmp_path: Path) -> None:
    _, rec, _, _ = await wrapped(
        tmp_path, sys.executable, "-c", "pass", "--token", "hunter2hunter2", CANARY
    )
    args = rec.events[0]["args"]
    assert "hunter2hunter2" not in args and CANARY not in " ".join(args)
    assert args[:2] == ["-c", "pass"]


async def test_a_missing_command_is_a_failed_invocation(tmp_path: Path) -> None:
    status, rec, _, _ = await wrapped(tmp_path, "no-such-tool-anywhere", "--flag")
    assert status == COMMAND_NOT_FOUND
    [event] = rec.events
    assert event["status"] == "failed" and event["exit_code"] == COMMAND_NOT_FOUND
    assert event["tool_id"] == "no-such-tool-anywhere"


@pytest.fixture
def sigint_handled() -> Iterator[None]:
    """SIGINT handled as in an interactive run, even if the test runner was started ignoring it
    (as a background job of a script is); an ignored SIGINT is left alone by design."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_handled")
async def test_sigint_to_the_wrapper_cancels_the_child(tmp_path: Path) -> None:
    async def interrupt_soon() -> None:
        await asyncio.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    task = asyncio.create_task(interrupt_soon())
    status, rec, _, _ = await wrapped(tmp_path, "sleep", "30")
    await task
    assert status == 130
    assert [e["status"] for e in rec.events] == ["running", "cancelled"]
    assert rec.events[-1]["exit_code"] == 130


async def test_a_failing_reporter_never_fails_the_command(tmp_path: Path) -> None:
    async def broken(_payload: dict[str, Any]) -> None:
        raise OSError("disk full")

    run = ToolRun([sys.executable, "-c", "import sys; sys.exit(5)"], cwd=tmp_path)
    assert await run_tool(run, broken) == 5


async def test_the_tool_id_option_wins(tmp_path: Path) -> None:
    _, rec, _, _ = await wrapped(tmp_path, sys.executable, "-c", "pass", tool_id="unit-tests")
    assert {e["tool_id"] for e in rec.events} == {"unit-tests"}


def test_tool_names() -> None:
    assert tool_name(["/usr/bin/ruff", "check"]) == "ruff"
    assert tool_name(["python3", "-m", "pytest", "-q"]) == "pytest"
    assert tool_name(["./deploy.sh"]) == "deploy.sh"


async def test_known_tools_are_asked_their_version_once(tmp_path: Path) -> None:
    cache: dict[str, str] = {}
    found = await tool_id_for([sys.executable, "-m", "pytest"], cache)
    assert found.startswith("pytest-") and found[7].isdigit()
    assert list(cache.values()) == [found]
    assert await tool_id_for([sys.executable, "-m", "pytest"], cache) == found


async def test_unknown_commands_are_never_run_for_a_version(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "deploy.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    assert await tool_id_for([str(script)]) == "deploy.sh"
    assert not marker.exists()


def test_summary_is_bounded() -> None:
    summary = summarise(b"\n".join(b"x" * 300 for _ in range(50)))
    assert len(summary) <= 500
    assert summary.startswith("…")


@pytest.mark.parametrize(("cwd", "expected"), [("", "."), ("src/pkg", "src/pkg"), ("..", None)])
def test_working_directory(tmp_path: Path, cwd: str, expected: str | None) -> None:
    workspace = tmp_path / "ws"
    (workspace / "src" / "pkg").mkdir(parents=True)
    assert workspace_relative(workspace / cwd, workspace) == expected


async def test_cancelling_the_run_terminates_the_child_and_reports_cancelled(
    tmp_path: Path,
) -> None:
    recorder = Recorder()
    run = ToolRun(["sleep", "30"], cwd=tmp_path, workspace=tmp_path)
    task = asyncio.create_task(run_tool(run, recorder, forward_signals=False))
    while not recorder.events:
        await asyncio.sleep(0.02)
    began = asyncio.get_running_loop().time()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.get_running_loop().time() - began < 10
    assert [e["status"] for e in recorder.events] == ["running", "cancelled"]
    assert recorder.events[-1]["exit_code"] == 128 + signal.SIGTERM

"""Run a tool task from the settings inside the daemon, recorded like ``mplp-lsp run``.

The editor asks for a task by name (``mplp.runTool``); the command comes from the ``tools``
setting, never from the request, and runs without a shell in a directory inside the
workspace. Its output is not the daemon's to print (stdout is the LSP channel): only the
summary comes back, with the status and the exit code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mplp_lsp.config.settings import ToolTask
from mplp_lsp.engine.intake import Intake, Submission
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sanitize.paths import PathRejected, relative_path
from mplp_lsp.sources.tool_run import ToolRun, run_tool


class UnknownTask(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class TaskResult:
    name: str
    status: str
    exit_code: int
    summary: str
    invocation_id: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "invocation_id": self.invocation_id,
        }


def task_directory(root: Path, task: ToolTask) -> Path:
    """The task's working directory, which must resolve inside the workspace."""
    if not task.cwd or task.cwd == ".":
        return root
    try:
        found, relative = relative_path(task.cwd, [root], must_exist=True)
    except PathRejected as rejected:
        raise UnknownTask(
            f"the task's cwd {task.cwd!r} is not usable: {rejected.message}"
        ) from None
    return found / relative


async def run_task(root: Path, name: str, task: ToolTask, intake: Intake) -> TaskResult:
    last: dict[str, Any] = {}

    async def report(payload: dict[str, Any]) -> None:
        last.clear()
        last.update(payload)
        await intake.submit(Submission(Kind.TOOL, payload, "lsp.runTool"))

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        spec = ToolRun(
            list(task.command), tool_kind=task.kind, cwd=task_directory(root, task), workspace=root
        )
        exit_code = await run_tool(
            spec, report, stdout_fd=devnull, stderr_fd=devnull, forward_signals=False
        )
    finally:
        os.close(devnull)
    return TaskResult(
        name,
        str(last.get("status", "failed")),
        exit_code,
        str(last.get("output_summary", "")),
        str(last.get("invocation_id", "")),
    )

"""Tool invocation actions: a subprocess with a timeout, cancellable, reported as tool_events.

The command runs in the workspace (or a folder inside it) with its output captured, not
relayed: the daemon has no terminal. The ``tool_event``s are the same shape ``mplp-lsp run``
reports (``running``, then ``succeeded``/``failed``/``cancelled`` with exit code and a
summary of the output's tail). A timeout or a cancelled run kills the child.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from pathlib import Path
from typing import Any

from mplp_lsp.actions.executor import ActionError, Handled, PendingEvent
from mplp_lsp.actions.kinds import ToolAction
from mplp_lsp.actions.paths import inside
from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.sanitize.redact import redact_args
from mplp_lsp.sources.tool_run import COMMAND_NOT_FOUND, summarise, tool_name, workspace_relative

_TAIL_CHUNKS = 16  # of up to 64 KiB each: what the summary is made from


async def _drain(stream: asyncio.StreamReader, tail: deque[bytes]) -> None:
    while chunk := await stream.read(65536):
        tail.append(chunk)


class ToolHandler:
    def __init__(self, root: Path) -> None:
        self.root = root

    async def __call__(self, action: ToolAction) -> Handled:
        cwd = self.root if action.cwd is None else inside(self.root, action.cwd, "action.cwd")
        base: dict[str, Any] = {
            "tool_id": action.tool_id or tool_name(action.argv),
            "tool_kind": action.tool_kind,
            "invocation_id": new_id(),
            "args": redact_args(action.argv[1:], program=action.argv[0]),
        }
        if (where := workspace_relative(cwd, self.root)) is not None:
            base["working_directory"] = where
        started = utc_timestamp()
        events = [PendingEvent(Kind.TOOL, {**base, "status": "running", "started_at": started})]

        def finish(status: str, exit_code: int, summary: str) -> None:
            events.append(
                PendingEvent(
                    Kind.TOOL,
                    {
                        **base,
                        "status": status,
                        "started_at": started,
                        "completed_at": utc_timestamp(),
                        "exit_code": exit_code,
                        "output_summary": summary,
                    },
                )
            )

        def fail(code: ErrorCode, message: str) -> ActionError:
            return ActionError(ValidationResult.single("action", code, message), events)

        try:
            child = await asyncio.create_subprocess_exec(
                *action.argv,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        except OSError as exc:
            finish("failed", COMMAND_NOT_FOUND, f"cannot run {Path(action.argv[0]).name}")
            raise fail(
                ErrorCode.TOOL_FAILED, f"cannot run {action.argv[0]}: {exc.strerror}"
            ) from None
        tail: deque[bytes] = deque(maxlen=_TAIL_CHUNKS)
        assert child.stdout is not None
        try:
            await asyncio.wait_for(_drain(child.stdout, tail), action.timeout_s)
            returncode = await child.wait()
        except (TimeoutError, asyncio.CancelledError) as stop:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await asyncio.shield(child.wait())
            if isinstance(stop, asyncio.CancelledError):
                finish("cancelled", 128 + 9, "cancelled")
                raise
            finish("failed", 128 + 9, f"timed out after {action.timeout_s:g} s")
            raise fail(
                ErrorCode.ACTION_TIMEOUT,
                f"{base['tool_id']} timed out after {action.timeout_s:g} s",
            ) from None
        summary = summarise(b"".join(tail))
        exit_code = 128 - returncode if returncode < 0 else returncode
        if returncode != 0:
            finish("failed", exit_code, summary)
            raise fail(ErrorCode.TOOL_FAILED, f"{base['tool_id']} exited with {exit_code}")
        finish("succeeded", 0, summary)
        return Handled(output={"exit_code": 0, "output_summary": summary}, events=events)

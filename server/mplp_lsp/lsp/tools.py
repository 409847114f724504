"""``mplp.runTool``: run a tool task from the ``tools`` setting and show how it ended."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from mplp_lsp.lsp.feature import Feature, command
from mplp_lsp.lsp.server import MplpLanguageServer

RUN_TOOL_COMMAND = "mplp.runTool"


async def run_tool_command(ls: MplpLanguageServer, args: list[Any]) -> dict[str, Any]:
    """Arguments: the task's name, then optionally a file or folder URI choosing the workspace."""
    from mplp_lsp.sanitize.paths import PathRejected
    from mplp_lsp.sources.tool_tasks import UnknownTask, run_task

    name, where = [*args, None, None][:2]
    await ls.ready.wait()
    workspaces = list(ls.workspaces or ())
    if not isinstance(name, str) or not workspaces:
        return _refused(ls, "mplp.runTool needs a task name and an open workspace")
    workspace = workspaces[0]
    if isinstance(where, str) and ls.workspaces is not None:
        try:
            workspace, _ = ls.workspaces.locate(where)
        except PathRejected as rejected:
            return _refused(ls, f"mplp.runTool: {rejected.message}")
    task = workspace.settings.tool(name)
    if task is None:
        known = ", ".join(sorted(n for n, _ in workspace.settings.tools)) or "none configured"
        return _refused(ls, f"no tool task named {name!r} in the tools setting ({known})")
    try:
        result = await run_task(workspace.root, name, task, workspace.intake)
    except UnknownTask as problem:
        return _refused(ls, str(problem))
    kind = types.MessageType.Info if result.status == "succeeded" else types.MessageType.Warning
    detail = f": {result.summary.splitlines()[-1]}" if result.summary else ""
    ls.window_show_message(
        types.ShowMessageParams(
            type=kind, message=f"{name} {result.status} (exit {result.exit_code}){detail}"
        )
    )
    return result.to_json()


def _refused(ls: MplpLanguageServer, message: str) -> dict[str, Any]:
    ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))
    return {"status": "refused", "message": message}


class ToolsFeature(Feature[MplpLanguageServer]):
    @command(RUN_TOOL_COMMAND)
    async def run_tool(self, *args: Any) -> dict[str, Any]:
        return await run_tool_command(self.server, list(args))

"""``mplp-lsp run``: run any command and record it as tool_events."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    TOOL_KINDS,
    WORKSPACE_DEFAULT,
    add_state_options,
    configuration,
    find_workspace,
)

if TYPE_CHECKING:
    from mplp_lsp.config.settings import Settings

_VERSIONS_FILE = "tool-versions.json"


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "run",
        help="run a command and record it as tool events",
        description=(
            "Run CMD with its arguments, pass its output through unchanged, and record a "
            "`running` tool_event, then `succeeded`, `failed` or `cancelled`. Exits with "
            "CMD's exit status. Recording problems are warnings; they never change the "
            "command's outcome."
        ),
        usage="mplp-lsp run [--kind KIND] [--tool-id ID] [--workspace PATH] -- CMD [ARGS...]",
    )
    parser.add_argument(
        "--kind",
        choices=TOOL_KINDS,
        help="what sort of tool this is (default: known for well-known tools such as pytest, "
        "ruff check, eslint or prettier, else other; docs/events-tool-ci.md lists them)",
    )
    parser.add_argument(
        "--tool-id",
        metavar="ID",
        help="name the tool (default: its name, plus its version for well-known tools)",
    )
    parser.add_argument(
        "--workspace",
        metavar="PATH",
        help=f"the workspace to record in, or any directory inside it ({WORKSPACE_DEFAULT})",
    )
    add_state_options(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="CMD [ARGS...]")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("mplp-lsp run: give the command to run after --", file=sys.stderr)
        return 2
    from mplp_lsp.sources.tool_run import ToolRun, run_tool

    cwd = Path.cwd()
    workspace = find_workspace(args)
    spec = ToolRun(command, tool_kind=args.kind, tool_id=args.tool_id, cwd=cwd, workspace=workspace)
    reporter = _Reporter(workspace, configuration(args, workspace).settings)
    return asyncio.run(run_tool(spec, reporter, version_cache=reporter.versions))


class _Reporter:
    """Hands each tool_event to the workspace's store (or its daemon) off the event loop."""

    def __init__(self, workspace: Path, settings: Settings) -> None:
        self._workspace = workspace
        self._settings = settings
        self.versions = _load_versions(self._versions_path())

    def _versions_path(self) -> Path | None:
        from mplp_lsp.engine.statedir import resolve_state_dir

        try:
            return resolve_state_dir(self._workspace, self._settings.state_dir) / _VERSIONS_FILE
        except OSError:
            return None

    async def __call__(self, payload: dict[str, Any]) -> None:
        from mplp_lsp.engine.handoff import deliver
        from mplp_lsp.engine.intake import Submission
        from mplp_lsp.protocol.kinds import Kind

        submission = Submission(Kind.TOOL, payload, "cli.run")
        [delivery] = await asyncio.to_thread(
            lambda: deliver(self._workspace, None, [submission], settings=self._settings)
        )
        if not delivery.ok:
            problems = "; ".join(f"{e.path}: {e.message}" for e in delivery.result.errors)
            raise ValueError(f"the event was refused ({problems})")
        if payload["status"] != "running":
            _save_versions(self._versions_path(), self.versions)


def _load_versions(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(key): str(value) for key, value in data.items()}


def _save_versions(path: Path | None, versions: dict[str, str]) -> None:
    if path is None or not versions:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(versions, sort_keys=True), encoding="utf-8")
        temporary.replace(path)
    except OSError:
        pass  # only a cache

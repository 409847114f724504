"""``mplp-lsp watch``: record a folder's file activity without an editor, printing events live."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    WORKSPACE_DEFAULT,
    add_api_options,
    add_log_options,
    add_remote_option,
    add_state_options,
    configuration,
    find_workspace,
    reconfiguration,
    workspace_path,
)

if TYPE_CHECKING:
    from mplp_lsp.drift.model import Drift
    from mplp_lsp.engine.workspace import Workspace


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "watch",
        help="record a folder's file activity without an editor",
        description=(
            "Watch PATH (default: the current directory) for file changes and record them as "
            "MPLP events, exactly as the editor integration does, printing each stored event "
            "(from the start-up catch-up on) and each new drift finding. Files created while "
            "nothing recorded are caught up as events at start; recorded files changed "
            "meanwhile become drift findings. Settings come from the files, the environment "
            "and the flags (`mplp-lsp config` shows them); a change to a settings file applies "
            "while it runs. Ctrl-C, SIGTERM or SIGHUP stop it after committing what it has "
            "seen."
        ),
    )
    parser.add_argument(
        "path",
        nargs="?",
        help=f"the folder to watch ({WORKSPACE_DEFAULT}); a folder given is watched as it is",
    )
    parser.add_argument("--json", action="store_true", help="print each stored envelope as JSON")
    add_state_options(parser)
    add_remote_option(parser)
    add_api_options(parser)
    add_log_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    root = workspace_path(args.path) if args.path is not None else find_workspace(args)
    try:
        return asyncio.run(_watch(root, args))
    except KeyboardInterrupt:
        return 130


async def _watch(root: Path, args: argparse.Namespace) -> int:
    from mplp_lsp.api.server import api_port, start_api
    from mplp_lsp.engine.file_activity import WATCH_MODULE
    from mplp_lsp.engine.folder_watch import watch_folder
    from mplp_lsp.engine.workspace import StateDirBusy, Workspace
    from mplp_lsp.engine.workspaces import Workspaces
    from mplp_lsp.process.exit_bound import stop_on_signals
    from mplp_lsp.process.heap import keep_started_objects
    from mplp_lsp.process.switching import switch_quickly

    switch_quickly()
    resolved = configuration(args, root)
    settings = resolved.settings
    # A watcher prints what its own store records: it does not follow another owner.
    workspaces = Workspaces(
        follow=False, reconfigure=reconfiguration(args), source_module=WATCH_MODULE
    )
    try:
        workspace = await workspaces.add(
            root, resolved, prepare=partial(_print_all, args.json), catch_up=False
        )
        assert isinstance(workspace, Workspace)
    except StateDirBusy as busy:
        print(f"mplp-lsp watch: {busy}", file=sys.stderr)
        return 1
    port = api_port(settings)
    api = await start_api(workspace, port) if port is not None else None
    keep_started_objects()
    stop = asyncio.Event()
    stop_on_signals(asyncio.get_running_loop(), stop.set)

    async def recording() -> None:
        await workspace.files.learnt()  # "watching" once the graph knows what was there
        print(
            f"watching {root} (store: {workspace.paths.database}); Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        if api is not None:
            print(f"HTTP API on {api.url} (token: {api.token_file})", file=sys.stderr, flush=True)

    announced: list[asyncio.Task[None]] = []

    def ready() -> None:
        workspaces.catch_up(workspace)
        announced.append(asyncio.get_running_loop().create_task(recording()))

    try:
        await watch_folder(workspaces, workspace, stop, ready)
    finally:
        if api is not None:
            await api.stop()
        await workspaces.close()
    return 0


def _print_all(as_json: bool, workspace: Workspace) -> None:
    """Print every stored event, from the start-up catch-up on, and every new drift finding
    (a recorded file changed while nothing recorded: the drift quick fixes decide)."""
    from mplp_lsp.protocol.summary import summary

    async def show(events: Any) -> None:
        for event in events:
            line = (
                json.dumps(event.envelope, ensure_ascii=False)
                if as_json
                else f"{event.kind:<14} {summary(event.envelope)}"
            )
            print(line, flush=True)

    def drifted(changes: Mapping[str, Drift | None]) -> None:
        for path, drift in changes.items():
            if drift is None or drift.state != "open":
                continue
            if as_json:
                print(json.dumps({"drift": drift.to_json()}, ensure_ascii=False), flush=True)
            else:
                print(f"{'drift':<14} {drift.reason} {path}", flush=True)

    workspace.bus.subscribe("print", show)
    workspace.drift.on_change(drifted)

"""``mplp-lsp flow run PLAN.json``: load a plan, approve it and execute it in the workspace.

The plan (and its context, with ``--context``) is created in the workspace's PSG, proposed,
approved and executed by the single-agent flow with the chosen executor: ``reference`` (the
default: runs nothing, every step succeeds) or ``workspace`` (runs each step's action from
``--actions``, a JSON object of step_id → action). The run must keep the SA profile's
invariants. When a daemon (``watch`` or ``serve``) owns the workspace's store, the plan is
handed to it over its loopback API and runs there; otherwise this process runs it. Either way
the events the run stores are printed as they are stored (one JSON envelope per line with
``--json``), then the result. Exit status 0: the plan completed; 1: it failed; 2: refused
(bad input, an SA invariant, a daemon whose API cannot be reached).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    add_state_options,
    add_workspace_option,
    configuration,
    find_workspace,
)
from mplp_lsp.cli.plan_run_output import EXIT_REFUSED, RunPrinter

if TYPE_CHECKING:
    from mplp_lsp.api.endpoint import Endpoint
    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.plans.runs import PlanRunRequest


_DESCRIPTION = (
    "Load a plan, approve it and execute it in the workspace. The plan (and its context, with "
    "--context) is created in the workspace's project graph, proposed, approved and executed "
    "by the single-agent flow with the chosen executor: reference (the default: runs nothing, "
    "every step succeeds) or workspace (runs each step's action from --actions, a JSON object "
    "of step_id to action). When a daemon (watch or serve) owns the workspace's store, the "
    "plan runs there. The events the run stores are printed as they are stored (one JSON "
    "envelope per line with --json), then the result. Exit status 0: the plan completed; 1: it "
    "failed; 2: refused (bad input, an SA profile invariant, a daemon that cannot be reached)."
)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "flow", help="run a plan through the single-agent flow", description=_DESCRIPTION
    )
    actions = parser.add_subparsers(dest="flow_command", metavar="ACTION", required=True)
    run_parser = actions.add_parser(
        "run", help="approve and execute a plan", description=_DESCRIPTION
    )
    run_parser.add_argument("plan", metavar="PLAN.json")
    run_parser.add_argument("--context", metavar="CONTEXT.json", help="the plan's context")
    run_parser.add_argument(
        "--actions", metavar="ACTIONS.json", help="step_id → action (for --executor workspace)"
    )
    run_parser.add_argument("--executor", choices=("reference", "workspace"), default="reference")
    run_parser.add_argument(
        "--vsl",
        metavar="URL",
        help="VSL backend (the vslUrl setting; default: sqlite in the state dir)",
    )
    run_parser.add_argument("--json", action="store_true", help="one JSON envelope per line")
    add_workspace_option(run_parser)
    add_state_options(run_parser)
    run_parser.set_defaults(handler=run)


def _load(path: str | None, what: str) -> Any:
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"mplp-lsp flow run: cannot read the {what} {path}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.plans.runs import PlanRunRequest
    from mplp_lsp.protocol.objects import ObjectKind, validate_object

    plan = _load(args.plan, "plan")
    context = _load(args.context, "context")
    actions = _load(args.actions, "actions") or {}
    if not isinstance(plan, dict) or not isinstance(actions, dict):
        print("mplp-lsp flow run: the plan and the actions must be JSON objects", file=sys.stderr)
        return EXIT_REFUSED
    if context is not None and not isinstance(context, dict):
        print("mplp-lsp flow run: the context must be a JSON object", file=sys.stderr)
        return EXIT_REFUSED
    checked = validate_object(ObjectKind.PLAN, plan)  # a plan_id to address, wherever it runs
    if not checked.ok:
        print(json.dumps(checked.to_dict()), file=sys.stderr)
        return EXIT_REFUSED
    request = PlanRunRequest(plan, context, actions, args.executor)
    printer = RunPrinter(args.json)
    root = find_workspace(args)
    daemon = _running_daemon(root, args.state_dir)
    if daemon is not None:
        if args.vsl:
            print(
                "mplp-lsp flow run: --vsl cannot be handed to the daemon that owns this "
                "workspace's store (it runs plans with its own VSL); run without --vsl",
                file=sys.stderr,
            )
            return EXIT_REFUSED
        from mplp_lsp.cli.daemon_plan_run import run_in_daemon

        return run_in_daemon(daemon, request, plan["plan_id"], printer)
    return asyncio.run(_run_here(root, request, plan["plan_id"], printer, args))


def _running_daemon(
    root: Path, state_dir: str | None
) -> tuple[StatePaths, Endpoint, dict[str, Any]] | None:
    """The API of the daemon that owns the store, or None when no daemon runs.

    A daemon without an API (``--no-api``) is left to :func:`_run_here`, which is refused
    by the state-dir lock with the usual message.
    """
    from mplp_lsp.api.endpoint import read_endpoint
    from mplp_lsp.cli.store_access import state_paths
    from mplp_lsp.engine.statedir import StateDirLock

    paths = state_paths(root, state_dir)
    owner = StateDirLock(paths.lock, workspace=root).owner()
    endpoint = read_endpoint(paths) if owner else None  # a dead daemon's file is stale
    return (paths, endpoint, owner) if endpoint is not None and owner is not None else None


async def _run_here(
    root: Path,
    request: PlanRunRequest,
    plan_id: str,
    printer: RunPrinter,
    args: argparse.Namespace,
) -> int:
    from mplp_lsp.engine.workspace import StateDirBusy, Workspace

    try:
        workspace = await Workspace.open(root, configuration(args, root).settings)
    except StateDirBusy as busy:
        print(f"mplp-lsp flow run: {busy}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        result = await workspace.owner.plans.run(
            request, plan_id, lambda events: printer.events(e.to_json() for e in events)
        )
        await workspace.settle()  # what consumers derive from the run, before the store closes
    finally:
        await workspace.close()
    return printer.result(result.to_json())

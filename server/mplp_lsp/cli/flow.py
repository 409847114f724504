"""``mplp-lsp flow run PLAN.json``: load a plan, approve it and execute it in the workspace.

The plan (and its context, with ``--context``) is created in the workspace's PSG, proposed,
approved and executed by the single-agent flow with the chosen executor: ``reference`` (the
default: runs nothing, every step succeeds) or ``workspace`` (runs each step's action from
``--actions``, a JSON object of step_id → action). The events the run stored are printed:
one JSON envelope per line with ``--json``. Exit status 0: the plan completed; 1: it failed;
2: refused (bad input, or a daemon owns the store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mplp_lsp.cli.common import (
    add_state_options,
    add_workspace_option,
    configuration,
    workspace_path,
)

EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "flow", help="run a plan through the single-agent flow", description=__doc__
    )
    actions = parser.add_subparsers(dest="flow_command", metavar="ACTION", required=True)
    run_parser = actions.add_parser("run", help="approve and execute a plan")
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
    plan = _load(args.plan, "plan")
    context = _load(args.context, "context")
    actions = _load(args.actions, "actions") or {}
    if not isinstance(plan, dict) or not isinstance(actions, dict):
        print("mplp-lsp flow run: the plan and the actions must be JSON objects", file=sys.stderr)
        return EXIT_REFUSED
    return asyncio.run(_run(workspace_path(args.workspace), plan, context, actions, args))


async def _run(
    root: Path,
    plan: dict[str, Any],
    context: Any,
    actions: dict[str, Any],
    args: argparse.Namespace,
) -> int:
    from mplp_lsp.runtime.ael import reference_executor, workspace_executor
    from mplp_lsp.runtime.execution import PlanExecution
    from mplp_lsp.runtime.flow import (
        ModuleInput,
        ModuleResult,
        RunSingleAgentFlowOptions,
        RuntimeContext,
        run_single_agent_flow,
    )
    from mplp_lsp.runtime.psg import Rejected
    from mplp_lsp.runtime.vsl import VslError, default_url, open_vsl
    from mplp_lsp.store.events import EventLog
    from mplp_lsp.workspace import StateDirBusy, Workspace

    try:
        workspace = await Workspace.open(root, configuration(args, root).settings)
    except StateDirBusy as busy:
        print(f"mplp-lsp flow run: {busy}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        vsl = open_vsl(workspace.settings.vsl_url or default_url(workspace.paths.root))
    except VslError as exc:
        await workspace.close()
        print(f"mplp-lsp flow run: {exc}", file=sys.stderr)
        return EXIT_REFUSED

    def loaded(value: Any) -> Any:
        async def module(_given: ModuleInput) -> ModuleResult:
            return ModuleResult(value)

        return module

    modules = {"plan": loaded(plan)}
    if context is not None:
        modules["context"] = loaded(context)
    ael = (
        reference_executor()
        if args.executor == "reference"
        else workspace_executor(root, workspace.settings)
    )
    try:
        first = await workspace.writer.read(lambda conn: EventLog(conn).last_event())
        after = first.seq if first is not None else 0
        try:
            result = await run_single_agent_flow(
                RunSingleAgentFlowOptions(
                    {"title": plan.get("title")},
                    RuntimeContext.new(),
                    modules,
                    vsl,
                    PlanExecution.from_owner(workspace.owner, ael, actions),
                )
            )
        except Rejected as refused:
            print(json.dumps(refused.result.to_dict()), file=sys.stderr)
            return EXIT_REFUSED
        await workspace.settle()
        events = await workspace.writer.read(lambda conn: EventLog(conn).query(after_seq=after))
    finally:
        await vsl.close()
        await workspace.close()
    for event in events:
        envelope = event.envelope
        if args.json:
            print(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))
        else:
            print(f"{envelope['timestamp']}  {event.kind:<18} {envelope['event_type']}")
    report = (result.output or {}).get("execution", {})
    summary = {"success": result.success, "execution": report, "error": result.error}
    print(json.dumps(summary, ensure_ascii=False), file=sys.stderr if args.json else sys.stdout)
    return EXIT_COMPLETED if result.success else EXIT_FAILED

"""``mplp-lsp hooks install|uninstall|status``: the git hooks that record Git activity at once;
``hooks ingest``: what those hooks start in the background when no daemon takes their records."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from mplp_lsp.cli.common import (
    WORKSPACE_DEFAULT,
    add_state_options,
    add_workspace_option,
    configuration,
    find_workspace,
)
from mplp_lsp.vcs.hook_names import FALLBACK_HOOKS, TRANSACTION_HOOK


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "hooks",
        help="install or remove the git hooks that record Git activity immediately",
        description=f"Manage the workspace repository's hooks: {TRANSACTION_HOOK} (with a git "
        f"older than 2.28, which never runs it: {', '.join(FALLBACK_HOOKS)}). They run shell "
        "builtins only, recording what Git reports into the state dir's spool; the daemon "
        "(or, with none running, one background `hooks ingest`) turns it into events. Each "
        "chains to a hook already there (run first; its exit status is kept); "
        "core.hooksPath is respected. `status` names the kind of each hook installed; "
        "`install` also upgrades hooks of an older mplp-lsp. Without hooks, the daemon still "
        "notices Git activity by polling.",
    )
    parser.add_argument("action", choices=("install", "uninstall", "status", "ingest"))
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the hooks' states as one JSON array (name, path, state, chained, "
        "needed, format, kind)",
    )
    add_workspace_option(parser, f"the workspace, or any directory inside it ({WORKSPACE_DEFAULT})")
    add_state_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    root = find_workspace(args)
    if args.action == "ingest":
        return _ingest(root, args)
    from mplp_lsp.engine.statedir import StatePaths, resolve_state_dir
    from mplp_lsp.vcs import hooks
    from mplp_lsp.vcs.repo import GitRepo, RepoRefused

    try:
        repo = GitRepo.open(root)
    except RepoRefused as refused:
        print(f"mplp-lsp hooks: {refused}", file=sys.stderr)
        return 1
    try:
        if args.action == "install":
            # The store this caller sees (the stateDir its configuration resolves to),
            # written into the hook: a commit from another shell, with another environment,
            # reports to the same store.
            state_dir = configuration(args, root).settings.state_dir
            states = hooks.install(repo, root, StatePaths(resolve_state_dir(root, state_dir)))
        elif args.action == "uninstall":
            states = hooks.uninstall(repo)
        else:
            states = hooks.status(repo)
    except OSError as error:
        print(f"mplp-lsp hooks: {error}", file=sys.stderr)
        return 1
    finally:
        repo.close()
    if args.json:
        print(json.dumps([state.to_json() for state in states], ensure_ascii=False))
        return 0
    for state in states:
        chained = " (runs the previous hook first)" if state.chained else ""
        print(f"{state.name}: {state.describe()}{chained}  {state.path}")
    if any(state.state == "outdated" for state in states):
        print("mplp-lsp hooks: outdated hooks: run `mplp-lsp hooks install` to upgrade them")
    return 0


# Below git's priority, not so far below that a busy machine starves it: at nice 19 it got
# no CPU for minutes under a load of 50 on two cores.
INGEST_NICENESS = 5


def _ingest(root: Path, args: argparse.Namespace) -> int:
    """Started by a hook while git commands may still run: Git's work first. Below git's
    priority, and before importing anything heavy, wait for the hooks to be quiet."""
    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.vcs.spool import Spool

    with contextlib.suppress(OSError, AttributeError):  # no nice() on Windows
        os.nice(INGEST_NICENESS)
    if args.state_dir:  # always, from a hook
        Spool(StatePaths(Path(args.state_dir)).git_spool).wait_quiet()
    from mplp_lsp.cli.git_ingest import run_ingester

    # Resolved for each round, at ingest time: a settings file changed a moment ago counts.
    return run_ingester(root, lambda: configuration(args, root).settings)

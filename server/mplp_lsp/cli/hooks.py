"""``mplp-lsp hooks install|uninstall|status``: the git hook that reports activity at once."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mplp_lsp.cli.common import (
    WORKSPACE_DEFAULT,
    add_state_options,
    add_workspace_option,
    configuration,
    find_workspace,
)
from mplp_lsp.vcs.hook_names import HOOK_NAMES


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "hooks",
        help="install or remove the git hooks that report Git activity immediately",
        description=f"Manage the workspace repository's hooks ({', '.join(HOOK_NAMES)}). "
        "Each chains to a hook already there (run first; its exit status is kept); "
        "core.hooksPath is respected. Without them, the daemon still notices Git activity by "
        "polling.",
    )
    parser.add_argument("action", choices=("install", "uninstall", "status"))
    add_workspace_option(parser, f"the workspace, or any directory inside it ({WORKSPACE_DEFAULT})")
    add_state_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.statedir import resolve_state_dir
    from mplp_lsp.vcs import hooks
    from mplp_lsp.vcs.repo import GitRepo, RepoRefused

    root = find_workspace(args)
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
            states = hooks.install(repo, root, str(resolve_state_dir(root, state_dir)))
        elif args.action == "uninstall":
            states = hooks.uninstall(repo)
        else:
            states = hooks.status(repo)
    except OSError as error:
        print(f"mplp-lsp hooks: {error}", file=sys.stderr)
        return 1
    finally:
        repo.close()
    for state in states:
        chained = " (runs the previous hook first)" if state.chained else ""
        print(f"{state.name}: {state.state}{chained}  {state.path}")
    if any(state.state == "outdated" for state in states):
        print("mplp-lsp hooks: outdated hooks: run `mplp-lsp hooks install` to upgrade them")
    return 0

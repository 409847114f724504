"""``mplp-lsp emit KIND``: hand one event (or a hook's observations) to a workspace's store.

Each kind is a subcommand registered from :data:`_KINDS`; all of them end in
:func:`mplp_lsp.handoff.deliver`, which stores the events directly when no daemon runs and
queues them for the daemon when one does. Input is checked first: bad input prints the
ValidationResult and exits 1. Values that may hold credentials belong in ``--json`` input,
not in flags, which other users can read in the process list.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mplp_lsp.cli.common import add_state_options, workspace_path
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.vcs.hook_names import HOOK_NAMES

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "emit",
        help="record an event from a script or a hook",
        description="Record one event in a workspace's store, directly, or through the "
        "running daemon's inbox. Exit status: 0 stored or queued, 1 invalid, 2 usage error.",
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    for register_kind in _KINDS.values():
        register_kind(kinds)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace", metavar="PATH", default=".", help="the workspace (default: here)"
    )
    add_state_options(parser)
    parser.add_argument(
        "--json", metavar="FILE", dest="json_input", help="the event as JSON (- for stdin)"
    )


def _register_git(kinds: Any) -> None:
    parser = kinds.add_parser(
        "git",
        help="a git_event",
        description="Record a git_event given as --json, or as flags. With --hook, read what "
        "a git hook was given on stdin and record the events it means (used by the hooks that "
        "`mplp-lsp hooks install` writes).",
    )
    _common(parser)
    parser.add_argument("--hook", choices=HOOK_NAMES, help="run as this git hook")
    parser.add_argument(
        "--wait-pid", type=int, metavar="PID", help="with --hook: wait until PID has exited"
    )
    for flag in ("repo-url", "commit-id", "ref-name", "event-kind", "timestamp"):
        parser.add_argument(f"--{flag}")
    for flag in ("author-name", "author-email", "commit-message"):
        parser.add_argument(f"--{flag}")
    for flag in ("files-changed", "insertions", "deletions"):
        parser.add_argument(f"--{flag}", type=int)
    parser.add_argument("--parent", action="append", dest="parent_commits", metavar="COMMIT")
    parser.set_defaults(handler=_run_git)


_GIT_FIELDS = (
    "repo_url",
    "commit_id",
    "ref_name",
    "event_kind",
    "timestamp",
    "author_name",
    "author_email",
    "commit_message",
    "files_changed",
    "insertions",
    "deletions",
    "parent_commits",
)


def _run_git(args: argparse.Namespace) -> int:
    root = workspace_path(args.workspace)
    if args.hook:
        from mplp_lsp.cli.git_hook import run_hook

        return run_hook(root, args.state_dir, args.hook, sys.stdin.read(), wait_pid=args.wait_pid)
    if args.json_input:
        payload = _read_json(args.json_input)
        if isinstance(payload, ValidationResult):
            return _invalid(payload)
    else:
        payload = {k: getattr(args, k) for k in _GIT_FIELDS if getattr(args, k) is not None}
    return _deliver(root, args.state_dir, Kind.GIT, payload)


def _read_json(name: str) -> Any:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        return json.loads(text)
    except json.JSONDecodeError as error:
        return ValidationResult.single("", ErrorCode.INVALID_JSON, f"not JSON: {error.msg}")
    except (OSError, UnicodeDecodeError) as error:
        raise SystemExit(f"mplp-lsp emit: cannot read {name}: {error}") from None


def _deliver(root: Path, state_dir: str | None, kind: Kind, data: Any) -> int:
    from mplp_lsp.handoff import deliver
    from mplp_lsp.intake import Submission

    [delivery] = deliver(root, state_dir, [Submission(kind, data, "cli")])
    if not delivery.ok:
        return _invalid(delivery.result)
    print(delivery.status)
    return EXIT_OK


def _invalid(result: ValidationResult) -> int:
    print(json.dumps(result.to_dict(), ensure_ascii=False))
    return EXIT_INVALID


_KINDS: dict[str, Callable[[Any], None]] = {"git": _register_git}


def hook_environment() -> None:
    """A hook inherits variables that point git elsewhere; our own git calls must not."""
    from mplp_lsp.vcs.repo import LOCATION_VARIABLES

    for name in LOCATION_VARIABLES:
        os.environ.pop(name, None)

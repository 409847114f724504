"""``mplp-lsp emit KIND``: hand one event to a workspace's store.

Each kind is a subcommand registered from :data:`_KINDS`; all of them end in
:func:`mplp_lsp.engine.handoff.deliver`, which stores the events directly when no daemon runs and
queues them for the daemon when one does. Input is checked first: bad input prints the
ValidationResult and exits 1. Values that may hold credentials belong in ``--json`` input,
not in flags, which other users can read in the process list.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    TOOL_KINDS,
    WORKSPACE_DEFAULT,
    add_state_options,
    add_workspace_option,
    configuration,
    find_workspace,
)
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult

if TYPE_CHECKING:
    from mplp_lsp.config.settings import Settings

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "emit",
        help="record an event from a script",
        description="Record one event in a workspace's store, directly, or through the "
        "running daemon's inbox. Exit status: 0 stored or queued, 1 invalid, 2 usage error.",
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    for register_kind in _KINDS.values():
        register_kind(kinds)


def _common(parser: argparse.ArgumentParser) -> None:
    add_workspace_option(parser, f"the workspace, or any directory inside it ({WORKSPACE_DEFAULT})")
    add_state_options(parser)
    parser.add_argument(
        "--json", metavar="FILE", dest="json_input", help="the event as JSON (- for stdin)"
    )
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="after storing, send the store's queued envelopes to this remote runtime or "
        "collector (token from MPLP_LSP_REMOTE_TOKEN); what cannot be sent now stays queued "
        "in the store for the next run",
    )
    parser.add_argument(
        "--wait",
        metavar="SECONDS",
        type=float,
        default=20.0,
        help="how long --remote keeps retrying before leaving the rest queued (default 20; "
        "a remote that refuses connections is not waited for)",
    )


def _register_git(kinds: Any) -> None:
    parser = kinds.add_parser(
        "git",
        help="a git_event",
        description="Record a git_event given as --json, or as flags.",
    )
    _common(parser)
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
    return _emit_fields(args, Kind.GIT, _GIT_FIELDS)


def _read_json(name: str) -> Any:
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        return json.loads(text)
    except json.JSONDecodeError as error:
        return ValidationResult.single("", ErrorCode.INVALID_JSON, f"not JSON: {error.msg}")
    except (OSError, UnicodeDecodeError) as error:
        raise SystemExit(f"mplp-lsp emit: cannot read {name}: {error}") from None


def _deliver(root: Path, args: argparse.Namespace, kind: Kind, data: Any) -> int:
    from mplp_lsp.engine.handoff import ForwardRequest, deliver, deliver_and_forward
    from mplp_lsp.engine.intake import Submission

    settings = configuration(args, root).settings
    if kind is Kind.FILE_UPDATE and _ignored(root, settings, data):
        print("ignored")  # as the daemon would: Git's ignore rules and the exclude setting
        return EXIT_OK
    submissions = [Submission(kind, data, "cli")]
    if args.remote is None:
        [delivery] = deliver(root, None, submissions, settings=settings)
        report = None
    else:
        request = ForwardRequest(args.remote, max(0.0, args.wait))
        [delivery], report = deliver_and_forward(root, None, submissions, request, settings)
    if not delivery.ok:
        return _invalid(delivery.result)
    print(delivery.status)
    if report is not None:
        if report.problem:
            print(f"mplp-lsp emit: not forwarded: {report.problem}", file=sys.stderr)
        elif report.pending:
            why = f" ({report.last_error})" if report.last_error else ""
            print(
                f"mplp-lsp emit: {report.pending} envelope(s) still queued for "
                f"{report.remote}{why}; they go with the next forwarding run",
                file=sys.stderr,
            )
        if report.dead_lettered:
            print(
                f"mplp-lsp emit: the remote refused {report.dead_lettered} envelope(s) in this "
                f"run; {report.dead_letters} dead letter(s) in all (`mplp-lsp outbox dead` "
                "lists them)",
                file=sys.stderr,
            )
    return EXIT_OK


def _ignored(root: Path, settings: Settings, data: Any) -> bool:
    """Whether a valid file event is for a path the daemon would not record: one Git ignores
    or ``exclude`` matches. What is refused instead (invalid input, ``.git`` and the state
    dir: path_reserved) is left to the validator and the intake, with their codes."""
    from pathlib import PurePosixPath

    from mplp_lsp.ignore.rules import IgnoreRules
    from mplp_lsp.protocol.validator import default_validator

    if not default_validator().validate(Kind.FILE_UPDATE, data).ok:
        return False
    path = data["file_path"]
    if any(part.casefold() == ".git" for part in PurePosixPath(path).parts):
        return False
    return IgnoreRules(root, excludes=settings.exclude).is_ignored(path)


def _invalid(result: ValidationResult) -> int:
    print(json.dumps(result.to_dict(), ensure_ascii=False))
    return EXIT_INVALID


RUN_STATUSES = ("pending", "running", "succeeded", "failed", "cancelled")
_STAGE_STATUSES = (*RUN_STATUSES, "skipped")
_TRIGGERS = ("push", "pull_request", "schedule", "manual", "tag", "other")
_CI_FLAGS = {  # ci_event field -> the flag that sets it
    "ci_provider": "--provider",
    "pipeline_id": "--pipeline-id",
    "run_id": "--run-id",
    "branch_name": "--branch",
    "commit_id": "--commit",
    "run_url": "--run-url",
    "trigger_kind": "--trigger",
    "started_at": "--started-at",
    "completed_at": "--completed-at",
}


def _register_ci(kinds: Any) -> None:
    parser = kinds.add_parser(
        "ci",
        help="a ci_event (fields read from the CI platform's environment)",
        description="Record the state of a CI run. Inside GitHub Actions, GitLab CI, Jenkins, "
        "CircleCI, Buildkite or Azure Pipelines the provider, pipeline, run, branch, commit, "
        "run URL and trigger come from the environment (docs/events-tool-ci.md); flags "
        "override them.",
    )
    _common(parser)
    parser.add_argument("--status", choices=RUN_STATUSES, help="the run's status (required)")
    for field, flag in _CI_FLAGS.items():
        extra: dict[str, Any] = {"choices": _TRIGGERS} if field == "trigger_kind" else {}
        parser.add_argument(flag, dest=field, **extra)
    parser.add_argument("--duration-ms", type=int, dest="duration_ms")
    parser.add_argument(
        "--stage",
        action="append",
        dest="stages",
        metavar="NAME:STATUS[:MS]",
        help="a stage of the run (repeatable)",
    )
    parser.set_defaults(handler=_run_ci)


def _run_ci(args: argparse.Namespace) -> int:
    from mplp_lsp.protocol.envelope import utc_timestamp
    from mplp_lsp.sources.ci_env import ci_fields

    root = find_workspace(args)
    if args.json_input:
        given = _read_json(args.json_input)
        if isinstance(given, ValidationResult):
            return _invalid(given)
        return _deliver(root, args, Kind.CI, given)
    if args.status is None:
        return _usage("emit ci: give --status (" + "|".join(RUN_STATUSES) + ")")
    payload: dict[str, Any] = ci_fields(os.environ)
    payload.update({f: getattr(args, f) for f in _CI_FLAGS if getattr(args, f) is not None})
    payload["status"] = args.status
    now = utc_timestamp()
    if args.status == "running":
        payload.setdefault("started_at", now)
    elif args.status in ("succeeded", "failed", "cancelled"):
        payload.setdefault("completed_at", now)
    if args.duration_ms is not None:
        payload["duration_ms"] = args.duration_ms
    if args.stages:
        stages = [_stage(text) for text in args.stages]
        if (bad := next((s for s in stages if isinstance(s, ValidationResult)), None)) is not None:
            return _invalid(bad)
        payload["stages"] = stages
    missing = [f for f in ("ci_provider", "pipeline_id", "run_id") if f not in payload]
    if missing:
        where = "no CI provider was detected in the environment"
        if "ci_provider" in payload:
            where = f"the {payload['ci_provider']} environment does not provide them"
        flags = ", ".join(_CI_FLAGS[f] for f in missing)
        names = ", ".join(missing)
        print(f"mplp-lsp emit ci: missing {names} ({where}); give {flags}", file=sys.stderr)
        return _invalid(
            ValidationResult.single(missing[0], ErrorCode.REQUIRED, f"{missing[0]} is required")
        )
    return _deliver(root, args, Kind.CI, payload)


def _stage(text: str) -> dict[str, Any] | ValidationResult:
    name, _, rest = text.partition(":")
    status, _, millis = rest.partition(":")
    problem = None
    if not name or status not in _STAGE_STATUSES:
        choices = ", ".join(_STAGE_STATUSES)
        problem = f"--stage {text!r}: want NAME:STATUS[:MS], STATUS one of {choices}"
    elif millis and not millis.isdigit():
        problem = f"--stage {text!r}: MS must be a whole number of milliseconds"
    if problem:
        return ValidationResult.single("stages", ErrorCode.PATTERN, problem)
    stage: dict[str, Any] = {"stage_name": name, "status": status}
    if millis:
        stage["duration_ms"] = int(millis)
    return stage


def _register_tool(kinds: Any) -> None:
    parser = kinds.add_parser(
        "tool",
        help="a tool_event",
        description="Record one state of a tool invocation (to wrap a command, use "
        "`mplp-lsp run`). Give the same --invocation-id to every state of one invocation.",
    )
    _common(parser)
    parser.add_argument("--tool-id")
    parser.add_argument(
        "--kind", dest="tool_kind", choices=TOOL_KINDS, help="what sort of tool it is"
    )
    parser.add_argument("--invocation-id", help="lowercase UUID v4 (default: a new one)")
    parser.add_argument("--status", choices=RUN_STATUSES)
    parser.add_argument("--started-at")
    parser.add_argument("--completed-at")
    parser.add_argument("--exit-code", type=int)
    parser.add_argument("--summary", dest="output_summary")
    parser.add_argument("--working-directory")
    parser.set_defaults(handler=_run_tool)


_TOOL_FIELDS = (
    "tool_id", "tool_kind", "invocation_id", "status", "started_at", "completed_at",
    "exit_code", "output_summary", "working_directory",
)  # fmt: skip


def _run_tool(args: argparse.Namespace) -> int:
    from mplp_lsp.protocol.envelope import new_id

    return _emit_fields(args, Kind.TOOL, _TOOL_FIELDS, invocation_id=new_id)


def _register_file(kinds: Any) -> None:
    parser = kinds.add_parser(
        "file",
        help="a file_update_event",
        description="Record a change to a file of the workspace (paths are workspace-relative; "
        "anything outside the workspace is refused).",
    )
    _common(parser)
    parser.add_argument("--path", dest="file_path")
    parser.add_argument(
        "--change", dest="change_type", choices=["created", "modified", "deleted", "renamed"]
    )
    parser.add_argument("--previous-path")
    parser.add_argument("--timestamp")
    parser.add_argument("--language")
    parser.set_defaults(handler=_run_file)


def _run_file(args: argparse.Namespace) -> int:
    from mplp_lsp.protocol.envelope import utc_timestamp

    fields = ("file_path", "change_type", "previous_path", "timestamp", "language")
    return _emit_fields(args, Kind.FILE_UPDATE, fields, timestamp=utc_timestamp)


def _emit_fields(
    args: argparse.Namespace,
    kind: Kind,
    fields: Sequence[str],
    **defaults: Callable[[], Any],
) -> int:
    """The event from --json, or from the flags named like its fields (with defaults)."""
    root = find_workspace(args)
    if args.json_input:
        payload = _read_json(args.json_input)
        if isinstance(payload, ValidationResult):
            return _invalid(payload)
    else:
        payload = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
        for field, make in defaults.items():
            payload.setdefault(field, make())
    return _deliver(root, args, kind, payload)


def _usage(message: str) -> int:
    print(f"mplp-lsp {message}", file=sys.stderr)
    return EXIT_USAGE


_KINDS: dict[str, Callable[[Any], None]] = {
    "git": _register_git,
    "ci": _register_ci,
    "tool": _register_tool,
    "file": _register_file,
}

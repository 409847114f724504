"""``mplp-lsp drift``: where the project graph and the files disagree, and fixing it.

Without a running daemon the command opens the workspace itself, scans, and can resolve.
While a daemon records the workspace it owns the store (one writer per state dir), so the
command prints the daemon's latest findings read-only and refuses ``--resolve``; use the
editor's quick fixes or stop the daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    add_state_options,
    add_workspace_option,
    configured_workspace,
    reading,
)

if TYPE_CHECKING:
    from mplp_lsp.config.settings import Settings
    from mplp_lsp.drift import DriftMonitor

EXIT_CLEAN = 0
EXIT_DRIFT = 1
EXIT_REFUSED = 2


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "drift",
        help="scan for drift between the project graph and the files; resolve it",
        description=(
            "Compare what the PSG recorded for each file with the disk (and the recorded "
            "HEAD with the repository). Exit status 0: no drift; 1: drift; 2: refused."
        ),
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="only these files")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--resolve",
        choices=("fs", "psg", "merge"),
        help="fs: the PSG takes the disk's version (and, without PATHs, the repository's "
        "HEAD); psg: restore the recorded content; merge: three-way merge (conflicts left as "
        "markers)",
    )
    add_workspace_option(parser)
    add_state_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.cli.store_access import state_paths
    from mplp_lsp.engine.statedir import StateDirLock

    root, resolved = configured_workspace(args)
    settings = resolved.settings
    paths = state_paths(root, settings.state_dir)
    reading(args, "drift", root, paths)
    wanted = [_relative(root, raw) for raw in args.paths]
    owner = StateDirLock(paths.lock, workspace=root).owner()
    if owner is not None:
        return _read_only(root, paths, wanted, owner, args)
    if not paths.database.exists():  # nothing recorded: nothing to drift from, no store made
        report = {"workspace": str(root), "read_only": True, "checked": 0, "drift": []}
        _print(report, args.json)
        return EXIT_CLEAN
    return asyncio.run(_scan(root, wanted, args, settings))


def _relative(root: Path, raw: str) -> str:
    """Lexically: a drifted file may be gone, so it cannot be resolved through the disk."""
    absolute = Path(raw) if Path(raw).is_absolute() else Path.cwd() / raw
    try:
        relative = Path(*_normal(absolute.parts)).relative_to(root)
    except ValueError:
        raise SystemExit(f"mplp-lsp drift: {raw} is outside the workspace {root}") from None
    return relative.as_posix()


def _normal(parts: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            if len(out) > 1:
                out.pop()
        elif part != ".":
            out.append(part)
    return out


def _read_only(
    root: Path, paths: Any, wanted: list[str], owner: dict[str, Any], args: argparse.Namespace
) -> int:
    from mplp_lsp.cli.store_access import open_read_only
    from mplp_lsp.drift import records

    daemon = f"the mplp-lsp daemon (pid {owner.get('pid')}) owns this workspace's store"
    if args.resolve:
        print(
            f"mplp-lsp drift: {daemon}; resolve drift from the editor's quick fixes, or stop "
            "the daemon first",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    conn = open_read_only(paths)
    try:
        found = records.load(conn) if conn is not None else {}
    finally:
        if conn is not None:
            conn.close()
    drifts = [d for d in found.values() if d.state == "open" and _selected(d.path, wanted)]
    report = {
        "workspace": str(root),
        "read_only": True,
        "daemon": owner,
        "drift": [d.to_json() for d in sorted(drifts, key=lambda d: d.path)],
    }
    _print(report, args.json, note=f"{daemon}: its latest findings, read-only")
    return EXIT_DRIFT if drifts else EXIT_CLEAN


def _selected(path: str, wanted: list[str]) -> bool:
    return not wanted or any(path == w or path.startswith(w.rstrip("/") + "/") for w in wanted)


async def _scan(root: Path, wanted: list[str], args: argparse.Namespace, settings: Settings) -> int:
    from mplp_lsp.drift import Strategy
    from mplp_lsp.engine.workspace import StateDirBusy, Workspace

    once = replace(settings, drift_interval=0)  # this scan, no periodic ones
    try:
        workspace = await Workspace.open(root, once)
    except StateDirBusy as busy:
        print(f"mplp-lsp drift: {busy}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        summary = await workspace.drift.scan()
        repository = summary.repository
        resolved = []
        if args.resolve:
            for path in sorted(workspace.drift.open_drifts):
                if _selected(path, wanted):
                    result = await workspace.drift.resolve(path, Strategy(args.resolve))
                    resolved.append(result.to_json())
            if repository is not None and not wanted:
                resolved.append(await _resolve_repository(workspace.drift, args.resolve))
                repository = await workspace.drift.repository_drift()
        drifts = [d for d in workspace.drift.open_drifts.values() if _selected(d.path, wanted)]
        report = {
            "workspace": str(root),
            "read_only": False,
            "checked": summary.checked,
            "seconds": round(summary.seconds, 3),
            "repository": repository.to_json() if repository else None,
            "resolved": resolved,
            "drift": [d.to_json() for d in sorted(drifts, key=lambda d: d.path)],
        }
    finally:
        await workspace.close()
    _print(report, args.json)
    return EXIT_DRIFT if drifts or report["repository"] else EXIT_CLEAN


async def _resolve_repository(monitor: DriftMonitor, strategy: str) -> dict[str, Any]:
    """Only the file system can win for a repository: the PSG does not move Git's refs."""
    from mplp_lsp.drift import Strategy
    from mplp_lsp.drift.reconcile import Resolution

    if strategy != Strategy.FS:
        message = "a repository drift is resolved with fs: the PSG takes the repository's HEAD"
        return Resolution("(repository)", Strategy(strategy), False, message).to_json()
    return (await monitor.resolve_repository()).to_json()


def _print(report: dict[str, Any], as_json: bool, note: str | None = None) -> None:
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
        return
    if note:
        print(note)
    for result in report.get("resolved", []):
        mark = "resolved" if result["ok"] else "not resolved"
        print(f"{mark:<13} {result['strategy']:<6} {result['path']}: {result['message']}")
    if report.get("repository"):
        print(report["repository"]["message"])
    if not report["drift"]:
        if not report.get("repository"):  # "no drift" only when there is none at all
            checked = f" ({report['checked']} files checked)" if "checked" in report else ""
            print(f"no drift{checked}")
        return
    print(f"{'PATH':<40} {'REASON':<11} MESSAGE")
    for drift in report["drift"]:
        print(f"{drift['path']:<40} {drift['reason']:<11} {drift['message']}")

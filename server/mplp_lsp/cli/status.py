"""``mplp-lsp status``: what the store holds and whether a daemon is recording."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    add_state_options,
    add_workspace_option,
    configured_workspace,
)

if TYPE_CHECKING:
    from mplp_lsp.config.settings import Settings
    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.engine.status import WorkspaceStatus


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "status",
        help="show what is stored and whether a daemon is recording",
        description=(
            "Counts by kind, rejected input, store size, last event time, drift, forwarding, "
            "and the daemon process that owns the store. While a daemon is recording, its own "
            "view is shown (asked over its HTTP API), with forwarding's live state."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_workspace_option(parser)
    add_state_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.api.endpoint import TOKEN_NAME, read_endpoint
    from mplp_lsp.cli.daemon_status import daemon_status, without_live_state
    from mplp_lsp.cli.store_access import state_paths
    from mplp_lsp.engine.statedir import StateDirLock

    workspace, resolved = configured_workspace(args)
    settings = resolved.settings
    paths = state_paths(workspace, settings.state_dir)
    owner = StateDirLock(paths.lock, workspace=workspace).owner()
    endpoint = read_endpoint(paths) if owner else None  # a dead daemon's file is stale
    api = {**endpoint.to_json(), "token_file": str(paths.root / TOKEN_NAME)} if endpoint else None
    status = daemon_status(paths, endpoint) if endpoint else None
    if status is None:
        status = _stored_status(paths, settings)
        if owner:
            status = without_live_state(status)
    report: dict[str, Any] = {
        "workspace": str(workspace),
        **status.to_json(),
        "daemon": owner,
        "api": api,
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    print(f"workspace     {workspace}")
    print(f"state dir     {status.state_dir}")
    print(f"daemon        {'pid ' + str(owner['pid']) if owner else 'not running'}")
    print(f"http api      {api['url'] + ' (token: ' + api['token_file'] + ')' if api else '-'}")
    print(f"events        {status.events_total} ({status.events_today} today)")
    for kind, count in sorted(status.events_by_kind.items()):
        print(f"  {kind:<18}{count}")
    print(f"rejected      {status.rejected}")
    print(f"last event    {status.last_event_time or '-'}")
    print(f"drift         {status.drift} file(s) ({status.drift_deferred} deferred)")
    print(f"store size    {status.store_bytes:,} bytes")
    if status.retention is not None:
        _print_retention(status.retention)
    if status.store_health != "ok":
        salvage = status.salvage or {}
        lost = (salvage.get("lost") or {}).get("events", 0)
        known = salvage.get("highest_seq") or "?"
        parts = [
            f"salvaged: {salvage.get('problem', '')}",
            f"{lost} of {known} events lost",
            "forwarding goes on in a new stream",
        ]
        if salvage.get("moved_to"):
            parts.append(f"damaged file kept in {salvage['moved_to']}")
        print(f"store health  {status.store_health} ({'; '.join(parts)})")
    if status.forward is not None:
        _print_forward(status.forward)
    return 0


def _stored_status(paths: StatePaths, settings: Settings) -> WorkspaceStatus:
    """What the store alone tells (a store not created yet: nothing)."""
    from mplp_lsp.cli.store_access import open_read_only
    from mplp_lsp.engine.compaction import policy_of
    from mplp_lsp.engine.status import WorkspaceStatus, read_status

    conn = open_read_only(paths)
    if conn is None:
        return WorkspaceStatus(state_dir=str(paths.root))
    try:
        return read_status(conn, paths, retention=policy_of(settings))
    finally:
        conn.close()


def _print_retention(plan: dict[str, Any]) -> None:
    days, most = plan["max_age_days"], plan["max_bytes"]
    limits = [f"events for {days} days" if days else "events for good"]
    limits.append(f"the store up to {most / 2**20:,.0f} MiB" if most else "no size limit")
    print(f"retention     {', '.join(limits)}")
    if plan["removable_events"]:
        why = "older than that" if plan["reason"] == "age" else "over the size limit"
        kept = plan["oldest_kept"] or "-"
        print(
            f"  next pass removes  {plan['removable_events']:,} events ({why}; the oldest kept "
            f"was stored {kept}) and the snapshots of files last recorded before them"
        )
    else:
        print("  next pass removes  nothing")
    waiting = plan["snapshots_to_compress"]
    print(
        f"  snapshots          {plan['snapshots']:,} ({plan['snapshot_bytes']:,} bytes"
        f"{f'; {waiting:,} to compress' if waiting else ''})"
    )
    last = plan["last_pass"]
    if last:
        print(
            f"  last pass          {last['at']}: {last['events_removed']:,} events and "
            f"{last['snapshots_removed']:,} snapshots removed, "
            f"{last['snapshots_compressed']:,} snapshots compressed"
        )


def _print_forward(forward: dict[str, Any]) -> None:
    sinks = forward.get("sinks") or {"collector": forward}
    shown = [
        (name, sink)
        for name, sink in sinks.items()
        if name == "collector" or sink.get("enabled") or sink.get("state") != "off"
    ]
    for name, sink in shown:
        label = "forwarding" if len(shown) == 1 else f"forwarding to {name}"
        _print_sink(label, sink, held=forward.get("held") or {})


def _print_sink(label: str, forward: dict[str, Any], *, held: dict[str, int]) -> None:
    """One sink's queue and counters; the envelopes held for other remotes once, after the
    collector's (they belong to no sink until requeued)."""
    age = forward["oldest_pending_age_s"]
    remote = forward.get("remote")
    print(f"{label:<13} {forward['state']}{f' (remote {remote})' if remote else ''}")
    queued_for = forward.get("queued_for")
    print(
        f"  outbox depth        {forward['depth']} ({forward['pending_bytes']:,} bytes)"
        f"{f', queued for {queued_for}' if queued_for and not remote else ''}"
    )
    print(f"  oldest pending      {'-' if age is None else f'{age:.1f} s ago'}")
    print(f"  last success        {forward['last_success_at'] or '-'}")
    print(f"  last error          {forward['last_error'] or '-'}")
    for name in ("delivered", "dead_lettered", "overflow_dropped", "quarantined"):
        print(f"  {name.replace('_', ' '):<20}{forward[name]}")
    if forward.get("rejected"):
        print(
            f"  rejected in part    {forward['rejected']} (acknowledged; the receiver refused them)"
        )
    sink = forward.get("sink", "collector")
    listing = "mplp-lsp outbox dead" + ("" if sink == "collector" else f" --sink {sink}")
    print(f"  dead letters held   {forward['dead_letters']} ({listing})")
    if sink != "collector":
        return
    for held_for, count in sorted(held.items()):
        print(f"  held for            {held_for}: {count} (not sent; mplp-lsp outbox held)")

"""``mplp-lsp events``: print stored events."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    add_state_options,
    add_workspace_option,
    configuration,
    find_workspace,
    reading,
)
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import STORED_KINDS
from mplp_lsp.protocol.summary import summary

if TYPE_CHECKING:
    from mplp_lsp.store.events import StoredEvent

_RELATIVE = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
FOLLOW_POLL_SECONDS = 0.25


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "events",
        help="print stored events",
        description="Print the events stored for a workspace, oldest first.",
    )
    parser.add_argument("--json", action="store_true", help="one stored envelope per line")
    parser.add_argument(
        "--kind",
        action="append",
        choices=[kind.value for kind in STORED_KINDS],
        metavar="KIND",
        help=f"only this kind ({', '.join(STORED_KINDS)}); repeat for several",
    )
    parser.add_argument(
        "--since",
        type=_since,
        metavar="TIME",
        help="an RFC 3339 time, or an age like 30s, 10m, 2h, 1d",
    )
    parser.add_argument("--limit", type=_count, metavar="N", help="at most N events")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    add_workspace_option(parser)
    add_state_options(parser)
    parser.set_defaults(handler=run)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"not a count (0 or more): {text!r}")
    return int(text)


def _since(text: str) -> str:
    if match := _RELATIVE.fullmatch(text):
        delta = timedelta(**{_UNITS[match[2]]: int(match[1])})
        return utc_timestamp(datetime.now(UTC) - delta)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time or an age: {text!r}") from None
    return utc_timestamp(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.cli.store_access import open_read_only, state_paths
    from mplp_lsp.store.events import EventLog

    root = find_workspace(args)
    paths = state_paths(root, configuration(args, root).settings.state_dir)
    reading(args, "events", root, paths)
    conn = open_read_only(paths)
    while conn is None and args.follow:
        time.sleep(FOLLOW_POLL_SECONDS)
        conn = open_read_only(paths)
    if conn is None:
        print(f"no events recorded yet (store: {paths.database})", file=sys.stderr)
        return 0
    events = EventLog(conn)
    after: int | None = None
    remaining = args.limit
    try:
        while True:
            batch = events.query(
                kinds=args.kind, since=args.since, after_seq=after, limit=remaining
            )
            for event in batch:
                print(_render(event, as_json=args.json), flush=True)
                after = event.seq
            if remaining is not None:
                remaining -= len(batch)
                if remaining <= 0:
                    break
            if not args.follow:
                break
            time.sleep(FOLLOW_POLL_SECONDS)
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    finally:
        conn.close()
    return 0


def _render(event: StoredEvent, *, as_json: bool) -> str:
    if as_json:
        return json.dumps(event.envelope, ensure_ascii=False, separators=(",", ":"))
    return f"{event.seq:>7}  {event.timestamp}  {event.kind:<14} {summary(event.envelope)}"

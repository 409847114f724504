"""``mplp-lsp events``: print stored events."""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    add_state_options,
    add_workspace_option,
    configured_workspace,
    reading,
)
from mplp_lsp.protocol.kinds import STORED_KINDS
from mplp_lsp.protocol.summary import summary

if TYPE_CHECKING:
    from mplp_lsp.store import paging

_RELATIVE = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
FOLLOW_POLL_SECONDS = 0.25
_FIRST_PAGE = 50


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "events",
        help="print stored events",
        description=(
            "Print the events stored for a workspace in the order they happened: by each "
            "event's own time (a change's or commit's timestamp, a tool or CI run's end), "
            "oldest first; a line also shows when the event was received if that was a second or "
            "more after it happened. The output "
            "streams: the first line comes at once, whatever the store holds."
        ),
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
        help="events that happened at or after this: an RFC 3339 time, or an age like 30s, "
        "10m, 2h, 1d",
    )
    parser.add_argument(
        "--limit", type=_count, metavar="N", help="the newest N events (still oldest first)"
    )
    parser.add_argument(
        "--oldest", action="store_true", help="with --limit: the oldest N events instead"
    )
    parser.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="then keep printing events as they are stored (Ctrl-C stops)",
    )
    add_workspace_option(parser)
    add_state_options(parser)
    parser.set_defaults(handler=run)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"not a count (0 or more): {text!r}")
    return int(text)


def _since(text: str) -> str:
    from mplp_lsp.protocol.envelope import utc_timestamp

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

    if args.oldest and args.limit is None:
        usage = "mplp-lsp events: --oldest needs --limit N (see mplp-lsp events --help)"
        print(usage, file=sys.stderr)
        return 2
    root, resolved = configured_workspace(args)
    paths = state_paths(root, resolved.settings.state_dir)
    reading(args, "events", root, paths)
    conn = open_read_only(paths)
    while conn is None and args.follow:
        time.sleep(FOLLOW_POLL_SECONDS)
        conn = open_read_only(paths)
    if conn is None:
        print(f"no events recorded yet (store: {paths.database})", file=sys.stderr)
        return 0
    try:
        printed, upto = _listing(conn, args)
        if not printed:
            waiting = "; waiting for new ones (Ctrl-C stops)" if args.follow else ""
            found = f"no events{_matching(args)} (store: {paths.database}){waiting}"
            print(found, file=sys.stderr, flush=True)
        if args.follow:
            _follow(conn, args, upto)
    except KeyboardInterrupt:
        pass
    finally:
        conn.close()
    return 0


def _listing(conn: sqlite3.Connection, args: argparse.Namespace) -> tuple[int, int]:
    """Print the events the options select, a page at a time; returns how many were printed
    and the newest ``seq`` the listing covered (where ``--follow`` goes on)."""
    from mplp_lsp.store import paging

    upto = paging.last_seq(conn)
    window = paging.Window(
        kinds=tuple(args.kind) if args.kind else None, since=args.since, upto_seq=upto
    )
    after: paging.Position | None = None
    if args.limit is not None and not args.oldest:
        after = paging.newest_start(conn, window, args.limit)
    printed = 0
    out = sys.stdout
    # A small first page: its first line is on the screen at once.
    for rows in paging.pages(conn, window, after, first=_FIRST_PAGE, total=args.limit):
        out.write("".join(_line(row, as_json=args.json) for row in rows))
        out.flush()
        printed += len(rows)
    return printed, upto


def _follow(conn: sqlite3.Connection, args: argparse.Namespace, upto: int) -> None:
    from mplp_lsp.store import paging

    window = paging.Window(kinds=tuple(args.kind) if args.kind else None, since=args.since)
    while True:
        rows = paging.stored_after(conn, window, upto)
        if rows:
            sys.stdout.write("".join(_line(row, as_json=args.json) for row in rows))
            sys.stdout.flush()
            upto = rows[-1][0]
        else:
            time.sleep(FOLLOW_POLL_SECONDS)


def _matching(args: argparse.Namespace) -> str:
    parts = [f" of kind {' or '.join(args.kind)}" if args.kind else ""]
    if args.since:
        parts.append(f" since {args.since}")
    return "".join(parts)


def _line(row: paging.Row, *, as_json: bool) -> str:
    seq, _event_id, kind, occurred_at, received_at, body = row
    if as_json:
        return body + "\n"  # the envelope as stored: compact JSON, one line
    # json, not orjson: it is loaded already, and orjson's own imports cost more than the
    # first page's lines (the first line is what a user waits for).
    try:
        envelope = json.loads(body)
    except ValueError:
        envelope = {}
    what = summary(envelope if isinstance(envelope, dict) else {})
    late = f"  (received {received_at})" if _reported_late(occurred_at, received_at) else ""
    return f"{seq:>7}  {occurred_at}  {kind:<14} {what}{late}\n"


# Arrival this long after the event is worth a word on its line (a hook's spool replayed, a
# CI run's end reported later, an offline machine); the usual milliseconds are not.
_LATE = timedelta(seconds=1)


def _reported_late(occurred_at: str, received_at: str) -> bool:
    try:
        lag = datetime.fromisoformat(received_at) - datetime.fromisoformat(occurred_at)
    except ValueError:
        return occurred_at != received_at
    return abs(lag) >= _LATE

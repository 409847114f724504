"""``mplp-lsp outbox dead|held|requeue|drop``: see the envelopes the remote refused or that are
held for another remote, and send them again or drop them."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from mplp_lsp.cli.common import (
    WORKSPACE_DEFAULT,
    add_state_options,
    add_workspace_option,
    configured_workspace,
    reading,
)

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.forward.outbox import DeadLetter

EXIT_NO_STORE = 2
EXIT_USAGE = 2


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "outbox",
        help="list the envelopes the remote refused or that are held for another remote; "
        "send them again or drop them",
        description=(
            "The forwarding outbox's dead letters: envelopes the remote refused for good "
            "(HTTP 400/413/422 for the envelope alone, 401/403/404 for its batch). Their "
            "events stay in the local store; after fixing the cause (a token, a bug on the "
            "remote), requeue them. And the envelopes held for another remote: queued for a "
            "remote that is no longer the one configured, they are not sent to the new one; "
            "they go when their remote is configured again, or you requeue them to the new "
            "one (requeue --held) or drop them (drop --held)."
        ),
    )
    actions = parser.add_subparsers(dest="outbox_command", metavar="ACTION", required=True)
    dead = actions.add_parser(
        "dead",
        help="list the dead letters, oldest first",
        description=(
            "List the dead letters in the order their events were accepted: seq, event id, "
            "kind, the HTTP status that refused it, when, and the reason. Reads the store "
            "only; safe while a daemon is running."
        ),
    )
    dead.add_argument("--json", action="store_true", help="one JSON object per dead letter")
    dead.add_argument("--limit", type=_positive, metavar="N", help="at most N dead letters")
    _sink_option(dead, "only the dead letters of this sink (collector, otlp)")
    _store_options(dead)
    dead.set_defaults(handler=run_dead)
    held = actions.add_parser(
        "held",
        help="list the envelopes held for remotes other than the one the outbox sends to",
        description=(
            "Envelopes queued for a remote that is no longer the one configured are held for "
            "it, not sent to the new one: one line per remote with how many, their size, when "
            "the oldest was recorded and when they were held. Reads the store only; safe "
            "while a daemon is running."
        ),
    )
    held.add_argument("--json", action="store_true", help="one JSON object per remote")
    _from_option(held, "only the envelopes held for this remote")
    _sink_option(held, "the sink whose queue is named as the current one (default: collector)")
    _store_options(held)
    held.set_defaults(handler=run_held)
    requeue = actions.add_parser(
        "requeue",
        help="put dead letters, or envelopes held for another remote, back into the outbox",
        description=(
            "Move the chosen dead letters back into the outbox (through the daemon that owns "
            "the store, when one runs). A running daemon with a "
            "remote sends them within seconds, without a restart; otherwise they go at the "
            "next start with a remote. Prints how many were requeued; a SEQ that is not a "
            "dead letter is named on stderr and the exit status is 1 (the others are still "
            "requeued). With --held, the envelopes held for other remotes (or the --from one) "
            "go to the remote the outbox sends to now instead."
        ),
    )
    chosen = requeue.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--all", action="store_true", help="every dead letter")
    chosen.add_argument(
        "--held",
        action="store_true",
        help="the envelopes held for other remotes, to be sent to the current one",
    )
    chosen.add_argument(
        "seqs",
        nargs="*",
        type=int,
        default=[],
        metavar="SEQ",
        help="the seq of a dead letter, as 'outbox dead' lists it",
    )
    _from_option(requeue, "with --held: only the envelopes held for this remote")
    _sink_option(
        requeue,
        "only the dead letters of this sink (default: every sink's); with --held, the sink "
        "whose remote gets them (default: collector)",
    )
    _store_options(requeue)
    requeue.set_defaults(handler=run_requeue)
    drop = actions.add_parser(
        "drop",
        help="drop the envelopes held for other remotes (they are never sent)",
        description=(
            "Forget the envelopes held for other remotes (or the --from one): they are not "
            "sent anywhere; their events stay in the local store. Asks first on a terminal; "
            "without one, --yes is required (exit 2 otherwise)."
        ),
    )
    drop.add_argument("--held", action="store_true", required=True, help="what to drop")
    _from_option(drop, "only the envelopes held for this remote")
    drop.add_argument("--yes", action="store_true", help="do not ask")
    _store_options(drop)
    drop.set_defaults(handler=run_drop)


def _from_option(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--from", dest="held_from", type=_remote, metavar="URL", help=text)


def _sink_option(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--sink", metavar="NAME", help=text)


def _remote(text: str) -> str:
    from mplp_lsp.forward.remote import remote_identity

    try:
        return remote_identity(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _store_options(parser: argparse.ArgumentParser) -> None:
    add_workspace_option(
        parser,
        f"the workspace whose outbox to use, or any directory inside it ({WORKSPACE_DEFAULT})",
    )
    add_state_options(parser)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number: {text!r}")
    return int(text)


def run_dead(args: argparse.Namespace) -> int:
    from mplp_lsp.cli.store_access import open_read_only

    conn = _open(args, open_read_only)
    if conn is None:
        return EXIT_NO_STORE
    try:
        letters = _sink_dead_letters(conn, args.sink, args.limit)
    finally:
        conn.close()
    if not letters and not args.json:
        # On stderr, as `gh` says "no open pull requests": stdout stays a clean (empty) list.
        print("no dead letters: the remote has refused nothing that is still held", file=sys.stderr)
        return 0
    try:
        for line in _dead_lines(letters, as_json=args.json):
            print(line, flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        pass
    return 0


def _sink_dead_letters(
    conn: sqlite3.Connection, sink: str | None, limit: int | None
) -> list[DeadLetter]:
    from mplp_lsp.forward.outbox import dead_letters, sink_id

    found = None if sink is None else sink_id(conn, sink)
    if sink is not None and found is None:
        return []
    return dead_letters(conn, limit=limit, sink=found)


def _dead_lines(letters: list[DeadLetter], *, as_json: bool) -> Iterator[str]:
    if as_json:
        for letter in letters:
            yield json.dumps(asdict(letter))  # ASCII: the reason is the remote's text
        return
    if letters:
        yield (
            f"{'seq':>7}  {'event_id':<36}  {'kind':<17} {'sink':<10} {'status':>6}  "
            f"{'dead_at':<24}  reason"
        )
    for letter in letters:
        status = "-" if letter.status is None else str(letter.status)
        yield (
            f"{letter.seq:>7}  {letter.event_id:<36}  {letter.kind:<17} "
            f"{_printable(letter.sink):<10} {status:>6}  "
            f"{letter.dead_at:<24}  {_printable(letter.reason)}"
        )


def run_held(args: argparse.Namespace) -> int:
    from mplp_lsp.cli.store_access import open_read_only
    from mplp_lsp.forward.held import held_groups

    conn = _open(args, open_read_only)
    if conn is None:
        return EXIT_NO_STORE
    try:
        groups = held_groups(conn, args.held_from)
        current = _queue_remote(conn, args.sink)
    finally:
        conn.close()
    if not groups and not args.json:
        owner = current or "the remote configured next"
        print(f"nothing is held: every queued envelope is for {owner}", file=sys.stderr)
        return 0
    try:
        for group in groups:
            if args.json:
                print(json.dumps(asdict(group)), flush=True)
            else:
                print(
                    f"{group.remote}: {group.count} envelopes ({group.bytes:,} bytes), oldest "
                    f"recorded {group.oldest_at}, held since {group.held_at}",
                    flush=True,
                )
    except BrokenPipeError:
        pass
    return 0


def run_requeue(args: argparse.Namespace) -> int:
    from mplp_lsp.cli.store_access import state_paths
    from mplp_lsp.engine.handoff import requeue_dead_letters

    if args.held:
        return _choose_held(args, "requeue")
    if args.held_from is not None:
        print("mplp-lsp outbox requeue: --from goes with --held", file=sys.stderr)
        return EXIT_USAGE

    workspace, resolved = configured_workspace(args)
    settings = resolved.settings
    done = requeue_dead_letters(
        workspace,
        args.state_dir,
        None if args.all else args.seqs,
        sink=args.sink,
        settings=settings,
    )
    if done is None:
        return _no_store(workspace, state_paths(workspace, args.state_dir))
    print(f"requeued {done.moved} dead letter{'' if done.moved == 1 else 's'}")
    if not done.taken:
        _handed("requeue", done.handed_to)
    if done.unknown:
        names = ", ".join(map(str, done.unknown))
        print(f"mplp-lsp outbox requeue: not dead letters: {names}", file=sys.stderr)
        return 1
    return 0


def run_drop(args: argparse.Namespace) -> int:
    from mplp_lsp.cli.store_access import open_read_only
    from mplp_lsp.forward.held import held_groups

    if not args.yes:
        conn = _open(args, open_read_only)
        if conn is None:
            return EXIT_NO_STORE
        try:
            count = sum(group.count for group in held_groups(conn, args.held_from))
        finally:
            conn.close()
        if count and not _confirmed(count, args.held_from):
            return EXIT_USAGE
    return _choose_held(args, "drop")


def _confirmed(count: int, remote: str | None) -> bool:
    """Asked on the terminal; refused, and said so, when there is none to ask on."""
    which = f"held for {remote}" if remote else "held for other remotes"
    if not sys.stdin.isatty():
        print(
            f"mplp-lsp outbox drop: {count} envelopes {which} would never be sent; "
            "no terminal to ask on, so nothing was dropped: add --yes to drop them",
            file=sys.stderr,
        )
        return False
    answer = input(f"drop {count} envelopes {which}? They will never be sent. [y/N] ")
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("mplp-lsp outbox drop: nothing was dropped", file=sys.stderr)
    return False


def _choose_held(args: argparse.Namespace, action: Literal["requeue", "drop"]) -> int:
    from mplp_lsp.cli.store_access import state_paths
    from mplp_lsp.engine.handoff import choose_held
    from mplp_lsp.forward.outbox import COLLECTOR
    from mplp_lsp.sources.inbox import HeldChoice

    workspace, resolved = configured_workspace(args)
    settings = resolved.settings
    choice = HeldChoice(action, args.held_from, getattr(args, "sink", None) or COLLECTOR)
    done = choose_held(workspace, args.state_dir, choice, settings=settings)
    if done is None:
        return _no_store(workspace, state_paths(workspace, args.state_dir))
    which = f"held for {args.held_from}" if args.held_from else "held for other remotes"
    verb = "requeued" if action == "requeue" else "dropped"
    print(f"{verb} {done.count} envelope{'' if done.count == 1 else 's'} {which}{_to(args)}")
    if not done.taken:
        _handed(action, done.handed_to)
    return 0


def _handed(action: str, pid: int | None) -> None:
    """Say that the owner has not taken the request yet (it will)."""
    print(
        f"mplp-lsp outbox {action}: handed to the daemon recording this workspace "
        f"(pid {pid}); it does it when it next reads its inbox",
        file=sys.stderr,
    )


def _to(args: argparse.Namespace) -> str:
    """Where requeued envelopes go: the remote the outbox is for."""
    from mplp_lsp.cli.store_access import open_read_only

    if not args.held or args.outbox_command != "requeue":
        return ""
    conn = _open(args, open_read_only)
    if conn is None:
        return ""
    try:
        current = _queue_remote(conn, args.sink)
    finally:
        conn.close()
    return f" to the queue for {current}" if current else ""


def _queue_remote(conn: sqlite3.Connection, sink: str | None) -> str | None:
    """The remote the queue of the sink named ``sink`` (the collector's for None) is for."""
    from mplp_lsp.forward.held import queue_remote
    from mplp_lsp.forward.outbox import COLLECTOR, sink_id

    found = sink_id(conn, sink or COLLECTOR)
    return None if found is None else queue_remote(conn, found)


def _open(
    args: argparse.Namespace, opener: Callable[[StatePaths], sqlite3.Connection | None]
) -> sqlite3.Connection | None:
    """The workspace's store through ``opener``, or None after saying there is none."""
    from mplp_lsp.cli.store_access import state_paths

    workspace, resolved = configured_workspace(args)
    paths = state_paths(workspace, resolved.settings.state_dir)
    conn = opener(paths)
    if conn is None:
        _no_store(workspace, paths)  # names the workspace it looked for
    else:
        reading(args, "outbox", workspace, paths)
    return conn


def _no_store(workspace: Path, paths: StatePaths) -> int:
    print(
        f"mplp-lsp outbox: no store for {workspace} (looked for {paths.database})",
        file=sys.stderr,
    )
    return EXIT_NO_STORE


def _printable(text: str) -> str:
    """The remote's text on one line, without control characters that a terminal would obey."""
    return "".join(char if char.isprintable() else " " for char in text)

"""The ``mplp-lsp`` command. Each subcommand lives in its own module with ``register()``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mplp_lsp import __version__
from mplp_lsp.cli import (
    collector,
    drift,
    emit,
    events,
    flow,
    hooks,
    outbox,
    run,
    serve,
    status,
    validate,
    watch,
)

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2

_COMMANDS = (
    serve,
    watch,
    events,
    status,
    validate,
    emit,
    run,
    hooks,
    drift,
    flow,
    collector,
    outbox,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mplp-lsp",
        description=(
            "Editor-side daemon for the MPLP v1.0 integration layer: turns editor, Git, tool "
            "and CI activity into validated, durable MPLP events."
        ),
    )
    parser.add_argument("--version", action="version", version=f"mplp-lsp {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    result: int = args.handler(args)
    return result

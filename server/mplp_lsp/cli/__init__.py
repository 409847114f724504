"""The ``mplp-lsp`` command. Each subcommand lives in its own module with ``register()``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import import_module

# Imported before the commands: its clock is the process's start where /proc does not say.
import mplp_lsp.process.start  # noqa: F401
from mplp_lsp import __version__
from mplp_lsp.cli.common import OneLineParser, UsageError, describe

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# The subcommands in the order --help lists them; each is the module of that name here.
_COMMANDS = (
    "serve",
    "watch",
    "events",
    "status",
    "validate",
    "emit",
    "run",
    "hooks",
    "drift",
    "flow",
    "collector",
    "outbox",
    "ui",
    "config",
    "completion",
)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser. When ``argv`` names a subcommand, only that one's module
    is imported and registered: a command starts with its own imports, not those of all
    fourteen (``events`` prints its first line in milliseconds; ``serve`` answers
    ``initialize`` sooner). Anything else (``--help``, a mistyped command) gets them all."""
    parser = OneLineParser(
        prog="mplp-lsp",
        description=(
            "Editor-side daemon for the MPLP v1.0 integration layer: turns editor, Git, tool "
            "and CI activity into validated, durable MPLP events."
        ),
    )
    parser.add_argument("--version", action="version", version=f"mplp-lsp {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _command_in(sys.argv[1:] if argv is None else argv)
    for name in _COMMANDS if chosen is None else (chosen,):
        import_module(f"{__name__}.{name}").register(commands)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    # The top-level parser has only flags without values, so its first other word is the
    # subcommand.
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in _COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        result: int = args.handler(args)
        if not sys.stdout.closed:  # ``serve`` hands stdout to the LSP transport, which closes it
            sys.stdout.flush()  # here, where a reader that went away is handled, not at exit
    except BrokenPipeError:
        # The reader went away (``status | head -3``): what it did not read is not ours to
        # report. Point stdout at nothing, so flushing it at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except UsageError as error:
        command = f"mplp-lsp {args.command}"
        print(f"{command}: {error} (see {command} --help)", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as error:  # the last net: one line, never a traceback (spec §7.7)
        print(f"mplp-lsp {args.command}: {describe(error)}", file=sys.stderr)
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            traceback.print_exc()
        return EXIT_INVALID
    return result

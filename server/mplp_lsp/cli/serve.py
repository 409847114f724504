"""``mplp-lsp serve``: run the language server for an editor."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import TYPE_CHECKING, Any

from mplp_lsp.cli.common import (
    add_api_options,
    add_log_options,
    add_remote_option,
    add_state_options,
    configuration,
    configure_logging,
)

if TYPE_CHECKING:
    from mplp_lsp.config.sources import Layer


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "serve",
        help="run the language server (editors start this)",
        description=(
            "Run the mplp-lsp language server. It speaks LSP on stdin/stdout (or on a loopback "
            "TCP port), turns file activity in the editor's workspace folders into MPLP "
            "file_update events and stores them durably. Logs go to stderr. Each folder's "
            "settings are the editor's, over the settings files and under the environment "
            "and these flags (docs/settings.md)."
        ),
    )
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        type=_host_port,
        help="listen on a loopback TCP port instead of stdio",
    )
    # Many language clients append --stdio on their own (vscode-languageclient with
    # TransportKind.stdio, for one); stdio is the default, so it changes nothing.
    transport.add_argument(
        "--stdio", action="store_true", help="speak LSP on stdin/stdout (the default)"
    )
    add_state_options(parser)
    add_remote_option(parser)
    add_api_options(parser)
    add_log_options(parser)
    parser.set_defaults(handler=run)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}") from None
    if not loopback:
        raise argparse.ArgumentTypeError("mplp-lsp listens on loopback addresses only")
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"port out of range: {number}")
    return host, number


# The logLevel setting's default, until the settings are read.
_EARLY_LOG_LEVEL = "warning"


def run(args: argparse.Namespace) -> int:
    # Until the editor has its answer to initialize, logging follows the flags alone: the
    # settings files, the environment and the editor's settings are read when the engine
    # starts (after initialized), so nothing the answer does not need is read before it.
    configure_logging(args.log_level or _EARLY_LOG_LEVEL, args.log_file)
    early = None
    if args.tcp is None:
        from mplp_lsp.lsp.handshake import answer_early

        early = answer_early(sys.stdin.fileno(), sys.stdout.fileno())
    from mplp_lsp.lsp.app import serve

    return serve(
        state_dir=args.state_dir,
        tcp=args.tcp,
        remote_url=args.remote,
        configure=lambda: configured_flags(args),
        early=early,
    )


def configured_flags(args: argparse.Namespace) -> Layer:
    """Logging and the settings files' warnings from the process's configuration, and the
    command line's settings for each folder (:func:`serve_flags`)."""
    configuration(args, None)
    return serve_flags(args)


def serve_flags(args: argparse.Namespace) -> Layer:
    """The command line's settings for each folder. ``--state-dir`` names one store, so it
    goes to the first folder only (the workspaces decide), not into every folder's settings."""
    from mplp_lsp.cli.common import command_line

    return command_line(args, skip=("state_dir",))

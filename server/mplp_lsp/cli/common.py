"""Options and set-up shared by the subcommands."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import NoReturn

LOG_LEVELS = ("error", "warning", "info", "debug")
TOOL_KINDS = ("linter", "formatter", "test_runner", "generator", "other")


def add_state_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where the store lives (default: MPLP_LSP_STATE_DIR, else a per-workspace folder "
        "under the user state dir)",
    )


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line naming the command and the problem (``--help`` shows the
    rest), with exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def add_remote_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="forward every accepted envelope to this remote runtime (default: "
        "MPLP_LSP_REMOTE_URL, else the remoteUrl setting; the token comes from "
        "MPLP_LSP_REMOTE_TOKEN or remoteTokenFile, never from the command line)",
    )


def add_api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-port",
        type=port,
        metavar="PORT",
        help="port of the loopback HTTP API (default: the apiPort setting; 0 picks a free port)",
    )
    parser.add_argument("--no-api", action="store_true", help="do not serve the HTTP API")


def port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {text!r}")
    return int(text)


def add_workspace_option(
    parser: argparse.ArgumentParser,
    help: str = "the workspace whose store to read (default: the current directory)",
) -> None:
    parser.add_argument("--workspace", metavar="PATH", default=".", help=help)


def add_log_options(parser: argparse.ArgumentParser, default: str = "warning") -> None:
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=default)
    parser.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")


def configure_logging(level: str, log_file: str | None) -> None:
    from mplp_lsp.sanitize.log_format import FORMAT, RedactingFormatter

    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8")
        if log_file
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(RedactingFormatter(FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # pygls logs every message at INFO; keep it quiet unless debugging.
    if level != "debug":
        logging.getLogger("pygls").setLevel(logging.WARNING)


def workspace_path(raw: str) -> Path:
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise SystemExit(f"mplp-lsp: {raw} is not a directory")
    return path.resolve()

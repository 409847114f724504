"""Options and set-up shared by the subcommands."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from mplp_lsp.config import Resolved
    from mplp_lsp.config.sources import Layer
    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.engine.workspaces import Reconfigure

log = logging.getLogger("mplp_lsp.config")

LOG_LEVELS = ("error", "warning", "info", "debug")
TOOL_KINDS = ("linter", "formatter", "test_runner", "generator", "other")


def add_state_options(parser: argparse.ArgumentParser) -> None:
    """``--state-dir`` and ``--set``: every command that resolves a workspace's settings."""
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where the store lives (the stateDir setting, over every other source; default: "
        "a per-workspace folder under the user state dir)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        dest="set_settings",
        metavar="KEY=VALUE",
        help="set a setting for this run, over every other source (repeatable; e.g. "
        "--set debounceMs=100; lists and objects as JSON; KEY= puts KEY back to its default, "
        "e.g. --set remoteUrl= forwards nothing); see `mplp-lsp config`",
    )


# Flags with a setting of their own: argparse dest -> (setting, flag, value given).
_DEDICATED: dict[str, tuple[str, str]] = {
    "state_dir": ("state_dir", "--state-dir"),
    "remote": ("remote_url", "--remote"),
    "api_port": ("api_port", "--api-port"),
    "log_level": ("log_level", "--log-level"),
    "vsl": ("vsl_url", "--vsl"),
}


def configuration(args: argparse.Namespace, root: Path | None) -> Resolved:
    """The workspace's resolved settings for this command (flags over every other source),
    with logging set to its ``logLevel`` and each problem with a source logged once."""
    from mplp_lsp.config.process import resolve_for_process

    return _applied(args, resolve_for_process(root, command_line(args)))


def configured_workspace(args: argparse.Namespace) -> tuple[Path, Resolved]:
    """:func:`find_workspace` and then :func:`configuration` of what it found, with the
    settings resolved once: those the search resolved for the folder it found are that
    folder's configuration."""
    root, resolved = _located(args, None)
    if resolved is None:
        return root, configuration(args, root)
    return root, _applied(args, resolved)


def _applied(args: argparse.Namespace, resolved: Resolved) -> Resolved:
    """``resolved``, with logging set to its ``logLevel`` and its warnings logged."""
    configure_logging(resolved.settings.log_level, getattr(args, "log_file", None))
    for warning in resolved.warnings:
        log.warning("settings: %s", warning)
    return resolved


def reconfiguration(args: argparse.Namespace) -> Reconfigure:
    """How a running command resolves a folder's configuration again (its files changed);
    the log level follows through the workspace's live settings."""
    import asyncio

    from mplp_lsp.config.process import resolve_for_process

    async def again(root: Path) -> Resolved:
        resolved = await asyncio.to_thread(resolve_for_process, root, command_line(args))
        for warning in resolved.warnings:
            log.warning("settings: %s", warning)
        return resolved

    return again


def describe(error: BaseException) -> str:
    """An error the command did not expect, as one line a user can act on: what failed and
    on which path, never a Python class name."""
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        hint = {
            FileExistsError: " (something else is in the way there)",
            PermissionError: " (check the owner and mode of that path)",
            IsADirectoryError: " (a folder is where a file was expected)",
            NotADirectoryError: " (a file is where a folder was expected)",
        }.get(type(error), "")
        return f"{error.strerror.lower()}{where}{hint}"
    text = str(error).strip()
    if isinstance(error, KeyError | IndexError | AttributeError | TypeError) or not text:
        # Not the user's doing: say so, and where to see more.
        return "an internal error (--set logLevel=debug shows where; please report it)"
    return text


class UsageError(Exception):
    """What the user typed cannot be done as typed: one line, exit status 2."""


def command_line(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> Layer:
    """The settings the command line sets: ``--set`` and the flags that have a setting.

    Raises :class:`UsageError` for a bad one: the user typed it on this command line."""
    from mplp_lsp.config.sources import RESET, flag_layer

    dedicated: dict[str, tuple[str, Any]] = {
        name: (flag, getattr(args, dest, None))
        for dest, (name, flag) in _DEDICATED.items()
        if name not in skip
    }
    if getattr(args, "no_api", False):
        dedicated["api_enabled"] = ("--no-api", False)
    if getattr(args, "no_remote", False):
        dedicated["remote_url"] = ("--no-remote", RESET)
    layer = flag_layer(getattr(args, "set_settings", []), dedicated)
    if layer.errors:
        raise UsageError("; ".join(layer.errors))
    return layer


def store_paths(root: Path, resolved: Resolved) -> StatePaths:
    """The state dir the resolved settings name (created if missing)."""
    from mplp_lsp.engine.statedir import StatePaths, resolve_state_dir

    return StatePaths(resolve_state_dir(root, resolved.settings.state_dir))


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line naming the command and the problem (``--help`` shows the
    rest), with exit status 2; a mistyped command or option gets the closest one offered.

    The terminal's width is asked for only when help or usage is formatted: argparse also
    makes a formatter for every argument added (to check its metavar), and the default
    formatter asks :mod:`shutil`, whose import loads zlib, bz2 and lzma (~5 ms: more than
    the rest of a command's parser, and paid before ``events`` prints its first line)."""

    _formatting = False

    def format_usage(self) -> str:
        with self._for_output():
            return super().format_usage()

    def format_help(self) -> str:
        with self._for_output():
            return super().format_help()

    @contextlib.contextmanager
    def _for_output(self) -> Iterator[None]:
        self._formatting = True
        try:
            yield
        finally:
            self._formatting = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self._formatting:
            return super()._get_formatter()
        return argparse.HelpFormatter(self.prog, width=_CHECKING_WIDTH)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {self._closest(message)} (see {self.prog} --help)\n")

    def _closest(self, message: str) -> str:
        """``message``, or with a mistyped choice or option, what was meant."""
        from difflib import get_close_matches

        if found := re.search(_INVALID_CHOICE, message):
            typed = found["value"]
            if close := get_close_matches(typed, _choices(self), n=1):
                what = found["what"].lower()
                return f"unknown {what} {typed!r}; did you mean {close[0]!r}?"
        elif (found := re.search(_UNRECOGNIZED, message)) and (
            close := get_close_matches(found["option"], _options(self), n=1)
        ):
            return f"{message}; did you mean {close[0]!r}?"
        return message


# The width of what argparse formats besides help and usage: its check of each argument
# and a subcommand's name (never shown), and the one line of --version (never wrapped).
_CHECKING_WIDTH = 80

# argparse's wording (3.11 to 3.14): "argument COMMAND: invalid choice: 'stauts' (choose
# from ...)" and "unrecognized arguments: --jsn". Compiled at a usage error, not at every
# start (re caches them).
_INVALID_CHOICE = r"argument (?P<what>\S+): invalid choice: '?(?P<value>[^'\s]+)'?"
_UNRECOGNIZED = r"unrecognized arguments: (?P<option>-[^\s=]+)"


def _choices(parser: argparse.ArgumentParser) -> list[str]:
    return [str(c) for a in parser._actions if a.choices for c in a.choices]


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of ``parser`` and of the commands under it (the top parser reports an
    option it does not know even when it belongs to a subcommand)."""
    found: list[str] = []
    for action in parser._actions:
        found += [o for o in action.option_strings if o.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _options(sub)
    return sorted(set(found))


def add_remote_option(parser: argparse.ArgumentParser) -> None:
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument(
        "--remote",
        metavar="URL",
        help="forward every accepted envelope to this remote runtime (the remoteUrl setting, "
        "over MPLP_LSP_REMOTE_URL and the files; the token comes from "
        "MPLP_LSP_REMOTE_TOKEN or remoteTokenFile, never from the command line)",
    )
    choice.add_argument(
        "--no-remote",
        action="store_true",
        help="forward nothing in this run, whatever remoteUrl the files or the environment set",
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


WORKSPACE_DEFAULT = (
    "default: the workspace around the current directory, i.e. the nearest folder at or "
    "above it that has a store, else its Git work tree, else the directory itself"
)


def add_workspace_option(
    parser: argparse.ArgumentParser,
    help: str = f"the workspace whose store to read, or a directory in it ({WORKSPACE_DEFAULT})",
) -> None:
    parser.add_argument("--workspace", metavar="PATH", help=help)


def find_workspace(args: argparse.Namespace, raw: str | None = None) -> Path:
    """The workspace a command means, from ``raw`` (default: ``--workspace``, else the
    current directory), which may be any directory inside it: the nearest folder at or above
    it whose store exists, else the Git work tree around it, else the folder itself (as git
    finds its repository from a subdirectory). A store a setting names (``--state-dir``,
    ``stateDir``) is the store of the folder it names (:mod:`mplp_lsp.engine.statedir`), so the
    same look finds it."""
    return _located(args, raw)[0]


def _located(args: argparse.Namespace, raw: str | None) -> tuple[Path, Resolved | None]:
    """The workspace :func:`find_workspace` finds, with its settings when the search resolved
    them (a folder whose store exists) and None when it did not (the Git work tree)."""
    from mplp_lsp.config.process import resolve_for_process
    from mplp_lsp.engine.statedir import DATABASE_NAME, locate_state_dir

    start = workspace_path(raw or getattr(args, "workspace", None) or ".")
    flags = command_line(args)
    for candidate in (start, *start.parents):
        resolved = resolve_for_process(candidate, flags)
        if (locate_state_dir(candidate, resolved.settings.state_dir) / DATABASE_NAME).is_file():
            return candidate, resolved
    return _work_tree(start), None


def _work_tree(start: Path) -> Path:
    from mplp_lsp.vcs.gitfile import find_git_dir

    found = find_git_dir(start)
    return found[0] if found is not None else start


def reading(
    args: argparse.Namespace, command: str, workspace: Path, paths: StatePaths | None = None
) -> None:
    """Say on stderr which workspace a command that reads a store reads (it may have been
    found from a subdirectory); with ``--json`` the output is a program's, which says it
    (``workspace``) where it has a place for it, and stderr stays quiet."""
    if not getattr(args, "json", False):
        store = f" (store: {paths.database})" if paths is not None else ""
        print(f"mplp-lsp {command}: workspace {workspace}{store}", file=sys.stderr)


def add_log_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        help="how much to log (the logLevel setting, over every other source)",
    )
    parser.add_argument(
        "--log-file", metavar="FILE", help="log here instead of stderr (a new file: yours only)"
    )


def configure_logging(level: str, log_file: str | None) -> None:
    from mplp_lsp.process.log_level import set_log_level
    from mplp_lsp.sanitize.log_format import FORMAT, RedactingFormatter

    if log_file:
        _create_private(log_file)
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8")
        if log_file
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(RedactingFormatter(FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    set_log_level(level)


def _create_private(log_file: str) -> None:
    """A new log file is the user's to read only: it names the workspace's files, branches
    and commands (redacted, but not for other users of the machine). One that exists (a
    file the user chose, ``/dev/stderr``) keeps its mode."""
    with contextlib.suppress(OSError):  # FileHandler then says what is wrong with the path
        os.close(os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600))


def workspace_path(raw: str) -> Path:
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise SystemExit(f"mplp-lsp: {raw} is not a directory")
    return path.resolve()

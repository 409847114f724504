"""``mplp-lsp ui``: log a browser in to the running daemon's local dashboard."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mplp_lsp.cli.common import (
    WORKSPACE_DEFAULT,
    add_state_options,
    add_workspace_option,
    find_workspace,
)
from mplp_lsp.ui.login import CODE_TTL
from mplp_lsp.ui.login_page import LoginCode, write_login_page

EXIT_NO_DAEMON = 2
_TIMEOUT_S = 10.0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "ui",
        help="log a browser in to the workspace's dashboard (--open: open it)",
        description=(
            "Ask the daemon serving this workspace (mplp-lsp serve or watch, with its HTTP "
            "API on) for a one-time login code, write a page that hands it to the dashboard "
            "into the state dir (readable by you only), and print that page's file:// URL. "
            "Opening the page logs one browser in, once, within a minute. Nothing in a URL "
            "or a process's arguments can log anyone in: the page passes the code in the "
            "URL's fragment, and the login page also takes it typed (printed on stderr)."
        ),
    )
    parser.add_argument("--open", action="store_true", help="open the page in a web browser")
    add_workspace_option(
        parser,
        f"the workspace whose dashboard to open, or any directory inside it ({WORKSPACE_DEFAULT})",
    )
    add_state_options(parser)
    parser.set_defaults(handler=run)


def request_code(url: str, token: str) -> LoginCode:
    """A fresh one-time login code from the server at ``url`` (the daemon's API or the team
    collector), asked with ``token``."""
    url = url.rstrip("/")
    request = urllib.request.Request(  # noqa: S310 - a loopback or configured collector URL
        f"{url}/ui/login-codes",
        method="POST",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:  # noqa: S310
        answer = json.loads(response.read())
    return LoginCode(f"{url}{answer['path']}", str(answer["code"]))


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.api.endpoint import ApiRefused, daemon_api, read_endpoint
    from mplp_lsp.cli.store_access import state_paths

    workspace = find_workspace(args)
    paths = state_paths(workspace, args.state_dir)
    endpoint = read_endpoint(paths)
    if endpoint is None:
        print(
            f"mplp-lsp ui: no daemon with an HTTP API serves {workspace} "
            "(start 'mplp-lsp watch' or open the folder in an editor)",
            file=sys.stderr,
        )
        return EXIT_NO_DAEMON
    try:
        login = request_code(*daemon_api(paths, endpoint))
    except ApiRefused as refused:
        print(f"mplp-lsp ui: the token is not sent: {refused}", file=sys.stderr)
        return EXIT_NO_DAEMON
    except (OSError, urllib.error.URLError, ValueError, KeyError) as error:
        print(f"mplp-lsp ui: the daemon at {endpoint.url} did not answer: {error}", file=sys.stderr)
        return EXIT_NO_DAEMON
    hand_over(login, paths.root, open_it=args.open)
    return 0


def hand_over(login: LoginCode, folder: Path, *, open_it: bool) -> None:
    """Write the private login page and print its URL; open it in the user's browser when
    asked, else (or when no browser opens) print the login page and the code to type."""
    page = write_login_page(folder, login).as_uri()
    print(page, flush=True)
    if open_it:
        import webbrowser

        if webbrowser.open(page):
            return
        print("mplp-lsp: no web browser to open", file=sys.stderr)
    print(
        f"mplp-lsp: open the page above in a browser (once, within {CODE_TTL:g} s), or open "
        f"{login.login_url} and enter the code {login.code}",
        file=sys.stderr,
        flush=True,
    )

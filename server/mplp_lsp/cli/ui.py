"""``mplp-lsp ui``: a one-time login link to the running daemon's local dashboard."""

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

EXIT_NO_DAEMON = 2
_TIMEOUT_S = 10.0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "ui",
        help="print (or open) a one-time login link to the workspace's dashboard",
        description=(
            "Ask the daemon serving this workspace (mplp-lsp serve or watch, with its HTTP "
            "API on) for a one-time login code and print the dashboard link that uses it. "
            "The link logs one browser in once, within a minute; the browser then holds a "
            "session cookie, and the API token never appears in a URL or in the page."
        ),
    )
    parser.add_argument("--open", action="store_true", help="open the link in a web browser")
    add_workspace_option(
        parser,
        f"the workspace whose dashboard to open, or any directory inside it ({WORKSPACE_DEFAULT})",
    )
    add_state_options(parser)
    parser.set_defaults(handler=run)


def login_link(url: str, token_file: str) -> str:
    """A fresh one-time link from the API at ``url``, authenticated with the token file."""
    return request_link(url, Path(token_file).read_text(encoding="utf-8").strip())


def request_link(url: str, token: str) -> str:
    """A fresh one-time dashboard link from the server at ``url`` (the daemon's API or the
    team collector), asked with ``token``."""
    url = url.rstrip("/")
    request = urllib.request.Request(  # noqa: S310 - the daemon's own loopback URL
        f"{url}/ui/login-codes",
        method="POST",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:  # noqa: S310
        answer = json.loads(response.read())
    return f"{url}{answer['path']}"


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.api.endpoint import read_endpoint
    from mplp_lsp.cli.store_access import state_paths

    workspace = find_workspace(args)
    endpoint = read_endpoint(state_paths(workspace, args.state_dir))
    if endpoint is None:
        print(
            f"mplp-lsp ui: no daemon with an HTTP API serves {workspace} "
            "(start 'mplp-lsp watch' or open the folder in an editor)",
            file=sys.stderr,
        )
        return EXIT_NO_DAEMON
    try:
        link = login_link(endpoint.url, endpoint.token_file)
    except (OSError, urllib.error.URLError, ValueError, KeyError) as error:
        print(f"mplp-lsp ui: the daemon at {endpoint.url} did not answer: {error}", file=sys.stderr)
        return EXIT_NO_DAEMON
    show(link, open_it=args.open)
    return 0


def show(link: str, *, open_it: bool) -> None:
    """Print the link and, when asked, open it in the user's browser."""
    print(link, flush=True)
    if open_it:
        import webbrowser

        if not webbrowser.open(link):
            print("mplp-lsp: no web browser to open; use the link above", file=sys.stderr)

"""Handing a login code to the user's browser through a file only the user can read.

A browser is started with a URL in its argv, and every local user can read every process's
argv (``/proc/<pid>/cmdline``). So the URL given to the browser is that of a small page in a
private folder (mode 0600, as notebook servers do), never the login code itself: the page
sends the browser on to the dashboard's login page with the code in the URL's fragment,
which browsers never send to a server, and the login page's script posts it from there.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mplp_lsp.engine.private import make_private_dir, write_private

__all__ = ["PAGE_NAME", "LoginCode", "collector_login_folder", "write_login_page"]

PAGE_NAME: Final = "ui-login.html"


@dataclass(frozen=True, slots=True)
class LoginCode:
    """A one-time code and the login page (``.../ui/login``) it is entered on."""

    login_url: str
    code: str


def write_login_page(folder: Path, login: LoginCode) -> Path:
    """Write the page into ``folder`` (0600, replacing the last one); its path."""
    target = html.escape(f"{login.login_url}#code={login.code}", quote=True)
    page = (
        '<!doctype html>\n<html><head><meta charset="utf-8">\n'
        f'<meta http-equiv="refresh" content="0; url={target}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        "<title>mplp-lsp dashboard</title></head>\n"
        f'<body><p><a href="{target}">Open the mplp-lsp dashboard</a> '
        "(once, within a minute).</p></body></html>\n"
    )
    path = folder / PAGE_NAME
    write_private(path, page.encode())
    return path


def collector_login_folder() -> Path:
    """Where ``collector ui`` writes its page: a private folder in the user's state dir."""
    import platformdirs

    folder = platformdirs.user_state_path("mplp-lsp") / "login"
    make_private_dir(folder, what="the login page folder")
    return folder

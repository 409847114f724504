"""The dashboards' HTTP shell for aiohttp: security headers, login, session cookie, assets.

Shared by the daemon's API (:mod:`mplp_lsp.api.app`) and the team collector
(:mod:`mplp_lsp.collector.team_app`); each adds its own data routes under ``/ui/api/``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from importlib import resources
from typing import Final

from aiohttp import web

from mplp_lsp.ui.login import SESSION_TTL, BrowserLogin

LOGIN_PATH: Final = "/ui/login"
CODES_PATH: Final = "/ui/login-codes"
_TYPES: Final = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
# No inline script or style anywhere: every script and style sheet is a file of ours.
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the login URL's code never leaves in a Referer
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
# Requests a logged-in page makes itself, or a navigation the user typed or was handed by a
# local program. Another local port is "same-site" and is refused: SameSite does not tell
# ports apart, Sec-Fetch-Site does not either, but "same-origin" does.
_OWN_FETCH: Final = frozenset({"same-origin", "none"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOGIN = web.AppKey("browser_login", BrowserLogin)


def cookie_name(port: int | None) -> str:
    """Per port: cookies do not tell ports apart, and two daemons share 127.0.0.1."""
    return f"mplp_ui_{port or 0}"


def _port(request: web.Request) -> int | None:
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return int(sockname[1]) if isinstance(sockname, tuple) and len(sockname) > 1 else None


def has_session(request: web.Request) -> bool:
    """The request carries a live session cookie and comes from our own pages."""
    login = request.app.get(LOGIN)
    if login is None:
        return False
    if request.headers.get("Sec-Fetch-Site", "none") not in _OWN_FETCH:
        return False
    return login.valid_session(request.cookies.get(cookie_name(_port(request))))


async def _secure(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(_HEADERS)


def protect(app: web.Application) -> None:
    """Every answer, refusals and streams included: not framable, no inline script, no
    sniffing. Added as headers are sent, so nothing a handler or middleware returns or
    raises goes out without them."""
    app.on_response_prepare.append(_secure)


async def issue_code(request: web.Request) -> web.Response:
    """A one-time login code, for a client that already holds the bearer token."""
    code = request.app[LOGIN].issue_code()
    return web.json_response(
        {"code": code, "path": f"{LOGIN_PATH}?code={code}"},
        headers={"Cache-Control": "no-store"},
    )


async def login(request: web.Request) -> web.StreamResponse:
    """Trade a login code for a session cookie and go to the dashboard."""
    from mplp_lsp.api.errors import error_response
    from mplp_lsp.protocol.result import ErrorCode

    session = request.app[LOGIN].redeem(request.query.get("code", ""))
    if session is None:
        return error_response(
            401, "code", ErrorCode.UNAUTHORIZED, "this login link is used up or has expired"
        )
    response = web.HTTPSeeOther("/ui/", headers={"Cache-Control": "no-store"})
    response.set_cookie(
        cookie_name(_port(request)),
        session,
        max_age=int(SESSION_TTL),
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,  # a team collector behind TLS: never sent over plain HTTP
    )
    return response


@cache
def _asset(name: str) -> bytes:
    return resources.files("mplp_lsp.ui").joinpath("static", name).read_bytes()


def _asset_names() -> frozenset[str]:
    folder = resources.files("mplp_lsp.ui").joinpath("static")
    return frozenset(entry.name for entry in folder.iterdir() if entry.is_file())


def asset_response(name: str) -> web.Response:
    suffix = name[name.rfind(".") :]
    return web.Response(
        body=_asset(name),
        content_type=_TYPES[suffix],
        charset="utf-8",
        headers={"Cache-Control": "no-cache"},
    )


def add_shell(app: web.Application, page: str) -> None:
    """The login routes, ``/ui/`` (the ``page`` HTML file) and the shared assets."""
    app[LOGIN] = BrowserLogin()
    names = _asset_names()

    async def index(_request: web.Request) -> web.Response:
        return asset_response(page)

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in names or name.endswith(".html"):
            raise web.HTTPNotFound()
        return asset_response(name)

    app.router.add_get("/ui", _to_ui)
    app.router.add_get("/ui/", index)
    app.router.add_get("/ui/static/{name}", asset)
    app.router.add_get(LOGIN_PATH, login)
    app.router.add_post(CODES_PATH, issue_code)


async def _to_ui(_request: web.Request) -> web.StreamResponse:
    raise web.HTTPMovedPermanently("/ui/")

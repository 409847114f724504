"""The dashboards' HTTP shell for aiohttp: security headers, login, session cookie, assets.

Shared by the daemon's API (:mod:`mplp_lsp.api.app`) and the team collector
(:mod:`mplp_lsp.collector.team_app`); each adds its own data routes under ``/ui/api/``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from functools import cache
from importlib import resources
from typing import Final

from aiohttp import web

from mplp_lsp.ui.login import NONCE_TTL, SESSION_TTL, LocalLogin, Login

LOGIN_PATH: Final = "/ui/login"
CODES_PATH: Final = "/ui/login-codes"
_LOGIN_ASSETS: Final = frozenset({"login.js", "ui.css"})  # what the login page loads
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
# A session cookie counts only on requests that say they come from our own pages: fetches
# of a logged-in page ("same-origin") and navigations the user typed or a bookmark made
# ("none"; only to read). Another local port is "same-site" for cookies, so SameSite alone
# does not tell a page on another port apart; Sec-Fetch-Site does. A request without the
# header is no browser's (every supported browser sends it): curl holding a stolen cookie
# gets nothing.
_OWN_FETCH: Final = frozenset({"same-origin", "none"})
_OWN_WRITE: Final = frozenset({"same-origin"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str]  # (method, canonical path), as the router knows it
LOGIN = web.AppKey("browser_login", Login)
# What a session may do: the routes of the pages themselves (what they show and their own
# buttons), added by each dashboard as it adds them. Anything else needs the bearer token.
PAGE_ROUTES = web.AppKey("page_routes", set[Route])
# What needs neither a token nor a session: the login page and its form.
OPEN_ROUTES: Final[frozenset[Route]] = frozenset(
    {("GET", LOGIN_PATH), ("POST", LOGIN_PATH), ("GET", LOGIN_PATH + "/{name}")}
)


def _cookie(request: web.Request, kind: str = "ui") -> str:
    """The name of a cookie of this server's login (the daemon's are per port)."""
    return request.app[LOGIN].cookie_name(_port(request), kind)


def _over_https(request: web.Request) -> bool:
    """The browser's connection is HTTPS: this one, or a TLS proxy's in front that says so
    (the header can only add ``Secure`` to a cookie, never take it away)."""
    return request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"


def _port(request: web.Request) -> int | None:
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return int(sockname[1]) if isinstance(sockname, tuple) and len(sockname) > 1 else None


def route_of(request: web.Request) -> Route | None:
    """The route a request was matched to (``HEAD`` as its ``GET``); None for no route."""
    resource = request.match_info.route.resource
    if resource is None:
        return None
    return ("GET" if request.method == "HEAD" else request.method), resource.canonical


def is_open(request: web.Request) -> bool:
    return route_of(request) in OPEN_ROUTES


def page_session(request: web.Request) -> bool:
    """The request is one of the pages' own, from a page of ours, with a live session."""
    login = request.app.get(LOGIN)
    if login is None or route_of(request) not in request.app[PAGE_ROUTES]:
        return False
    allowed = _OWN_FETCH if request.method in ("GET", "HEAD") else _OWN_WRITE
    if request.headers.get("Sec-Fetch-Site") not in allowed:
        return False
    return login.valid_session(request.cookies.get(_cookie(request)))


async def _secure(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(_HEADERS)


def protect(app: web.Application) -> None:
    """Every answer, refusals and streams included: not framable, no inline script, no
    sniffing. Added as headers are sent, so nothing a handler or middleware returns or
    raises goes out without them."""
    app.on_response_prepare.append(_secure)


def add_page_routes(app: web.Application, routes: Iterable[tuple[str, str, Handler]]) -> None:
    """Add routes of the pages: a session may use them (and only them, with the login)."""
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
        app[PAGE_ROUTES].add((method, path))


async def issue_code(request: web.Request) -> web.Response:
    """A one-time login code, for a client that already holds the bearer token."""
    code = await request.app[LOGIN].issue_code()
    return web.json_response(
        {"code": code, "path": LOGIN_PATH}, headers={"Cache-Control": "no-store"}
    )


async def login_page(request: web.Request) -> web.Response:
    """The login page, with a fresh pre-login nonce that its form must send back."""
    response = asset_response("login.html")
    response.headers["Cache-Control"] = "no-store"
    response.set_cookie(
        _cookie(request, "login"),
        await request.app[LOGIN].issue_nonce(),
        max_age=int(NONCE_TTL),
        path=LOGIN_PATH,
        httponly=True,
        samesite="Strict",
        secure=_over_https(request),
    )
    return response


async def login(request: web.Request) -> web.StreamResponse:
    """Trade a code, posted by the login page with its nonce, for a session cookie."""
    from mplp_lsp.api.errors import error_response
    from mplp_lsp.protocol.result import ErrorCode

    if request.headers.get("Sec-Fetch-Site") != "same-origin":
        return error_response(
            403, "Sec-Fetch-Site", ErrorCode.FORBIDDEN_ORIGIN, "log in from the login page"
        )
    code = await _posted_code(request)
    nonce = request.cookies.get(_cookie(request, "login"))
    session = await request.app[LOGIN].redeem(code, nonce)
    if session is None:
        return error_response(
            401, "code", ErrorCode.UNAUTHORIZED, "this login code is used up or has expired"
        )
    response = web.json_response(
        {"ok": True, "next": "/ui/"}, headers={"Cache-Control": "no-store"}
    )
    response.del_cookie(_cookie(request, "login"), path=LOGIN_PATH)
    response.set_cookie(
        _cookie(request),
        session,
        max_age=int(SESSION_TTL),
        path="/",
        httponly=True,
        samesite="Strict",
        secure=_over_https(request),  # a team collector behind TLS: never over plain HTTP
    )
    return response


async def _posted_code(request: web.Request) -> str:
    """``{"code": ...}`` from the body; "" for anything else (then no session opens)."""
    import json

    if request.content_type != "application/json":
        return ""
    try:
        body = json.loads(await request.read())
    except ValueError:
        return ""
    code = body.get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) else ""


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


def add_shell(app: web.Application, page: str, logins: Login | None = None) -> None:
    """The login routes, ``/ui/`` (the ``page`` HTML file) and the shared assets; ``logins``
    are the daemon's own (:class:`LocalLogin`) unless given."""
    app[LOGIN] = logins or LocalLogin()
    app[PAGE_ROUTES] = set()
    names = _asset_names()

    async def index(_request: web.Request) -> web.Response:
        return asset_response(page)

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in names or name.endswith(".html"):
            raise web.HTTPNotFound()
        return asset_response(name)

    # The login page's own script and style are served to a browser without a session.
    async def login_asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _LOGIN_ASSETS:
            raise web.HTTPNotFound()
        return asset_response(name)

    add_page_routes(
        app,
        (
            ("GET", "/ui", _to_ui),
            ("GET", "/ui/", index),
            ("GET", "/ui/static/{name}", asset),
        ),
    )
    app.router.add_get(LOGIN_PATH, login_page, allow_head=False)
    app.router.add_post(LOGIN_PATH, login)
    app.router.add_get(LOGIN_PATH + "/{name}", login_asset, allow_head=False)
    app.router.add_post(CODES_PATH, issue_code)


async def _to_ui(_request: web.Request) -> web.StreamResponse:
    raise web.HTTPMovedPermanently("/ui/")

"""Who may talk to the loopback API: a local peer, a loopback Host, the bearer token.

Checked in this order, before a handler runs and before any body is read:

1. the peer address is loopback (the listener binds 127.0.0.1 only; this holds even if a
   socket is ever handed to it from elsewhere);
2. the ``Host`` header names a loopback host (``127.0.0.1``, ``localhost``, ``[::1]``,
   optionally with our port): a web page that rebinds its own DNS name to 127.0.0.1 still
   sends its own name, so a browser cannot be turned into a client (DNS rebinding);
3. an ``Origin`` header, if present, names a loopback origin: browsers send one with every
   cross-site POST, scripts and hooks send none, so a page that somehow holds the token still
   cannot use it;
4. ``Authorization: Bearer <token>`` matches the token in the state dir's 0600 file,
   compared in constant time; or, on the dashboard pages' own routes only, a browser session
   opened with a one-time login code (:mod:`mplp_lsp.api.dashboard_shell`); only the login
   page needs neither;
5. a declared body larger than the limit is refused from its ``Content-Length`` alone; a
   chunked body is cut off by aiohttp's ``client_max_size`` once it passes the limit.

Time is bounded too: a connection that has not completed a request within
:data:`~mplp_lsp.api.credentials.IDLE_TIMEOUT` is closed (slow-loris headers), and a body
that does not arrive within :data:`BODY_TIMEOUT` is answered 408 (see ``app._json``).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Collection

from aiohttp import web
from aiohttp.typedefs import Middleware

from mplp_lsp.api.errors import error_response
from mplp_lsp.protocol.result import ErrorCode

MAX_BODY = 1024 * 1024  # bytes; the largest integration payload or plan is far below this
BODY_TIMEOUT = 10.0  # seconds to receive a whole request body

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback_peer(peername: object) -> bool:
    if not isinstance(peername, tuple) or not peername:
        return False
    try:
        address = ipaddress.ip_address(str(peername[0]).split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def guard(
    token: str,
    hosts: Callable[[], Collection[str]],
    max_body: int = MAX_BODY,
    *,
    session: Callable[[web.Request], bool] | None = None,
    is_open: Callable[[web.Request], bool] | None = None,
) -> Middleware:
    """``session`` says whether a request may go ahead on a dashboard session alone (a page
    route, from a page); ``is_open`` whether it needs neither that nor the token (login)."""
    expected = token.encode()

    def browser(request: web.Request) -> bool:
        return session is not None and session(request)

    def open_route(request: web.Request) -> bool:
        return is_open is not None and is_open(request)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        if not is_loopback_peer(peer):
            return error_response(403, "", ErrorCode.FORBIDDEN_PEER, "only local clients")
        if request.headers.get("Host", "").lower() not in hosts():
            return error_response(
                403, "Host", ErrorCode.FORBIDDEN_HOST, "the Host header must name a loopback host"
            )
        origin = request.headers.get("Origin")
        if origin is not None and not _loopback_origin(origin, hosts()):
            return error_response(
                403, "Origin", ErrorCode.FORBIDDEN_ORIGIN, "cross-origin requests are refused"
            )
        scheme, _, offered = request.headers.get("Authorization", "").partition(" ")
        bearer = scheme.lower() == "bearer" and hmac.compare_digest(
            offered.strip().encode(), expected
        )
        if not bearer and not open_route(request) and not browser(request):
            response = error_response(
                401, "Authorization", ErrorCode.UNAUTHORIZED, "a valid bearer token is required"
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="mplp-lsp"'
            return response
        length = request.content_length
        if length is not None and length > max_body:
            return error_response(
                413, "", ErrorCode.BODY_TOO_LARGE, f"the body is larger than {max_body} bytes"
            )
        return await handler(request)

    return middleware


def _loopback_origin(origin: str, hosts: Collection[str]) -> bool:
    scheme, _, host = origin.lower().partition("://")
    return scheme in ("http", "https") and host in hosts

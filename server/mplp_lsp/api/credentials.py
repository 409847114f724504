"""The API's bearer token and the names a loopback client may use (no aiohttp here).

:mod:`mplp_lsp.api.server` binds the listener with these at start; aiohttp itself is loaded
only when the first connection arrives.
"""

from __future__ import annotations

import secrets

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
IDLE_TIMEOUT = 10.0  # seconds a connection may sit without a complete request


def new_token() -> str:
    return secrets.token_urlsafe(32)


def allowed_hosts(port: int) -> frozenset[str]:
    return frozenset(LOOPBACK_NAMES) | {f"{name}:{port}" for name in LOOPBACK_NAMES}

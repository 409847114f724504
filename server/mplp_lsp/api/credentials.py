"""The API's bearer token file and the names a loopback client may use (no aiohttp here).

:mod:`mplp_lsp.api.server` binds the listener with these at start; aiohttp itself is loaded
only when the first connection arrives.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
IDLE_TIMEOUT = 10.0  # seconds a connection may sit without a complete request


def new_token() -> str:
    return secrets.token_urlsafe(32)


def write_token(path: Path, token: str) -> None:
    """Write the token readable by this user only, replacing any older file atomically."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask cannot widen it, an old file's mode does not matter
        os.write(fd, token.encode())
    finally:
        os.close(fd)
    temporary.replace(path)


def allowed_hosts(port: int) -> frozenset[str]:
    return frozenset(LOOPBACK_NAMES) | {f"{name}:{port}" for name in LOOPBACK_NAMES}

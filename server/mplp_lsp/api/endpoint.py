"""Where a running daemon's API is, and its token: two files in the state dir (no aiohttp).

``api.json`` says where the API listens (``{url, pid}``); the token is always the state
dir's own ``api-token``, never a file that ``api.json`` or anything else names, and it is
sent only to a loopback address. Both files are only as trustworthy as the state dir, which
:func:`~mplp_lsp.engine.statedir.resolve_state_dir` checks is the user's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mplp_lsp.engine.statedir import StatePaths

__all__ = ["ENDPOINT_NAME", "TOKEN_NAME", "ApiRefused", "Endpoint", "daemon_api", "read_endpoint"]

TOKEN_NAME = "api-token"  # noqa: S105 - the file name, not a token
ENDPOINT_NAME = "api.json"


class ApiRefused(Exception):
    """The token is not sent: the endpoint is not loopback, or the token file is not private."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str

    def to_json(self) -> dict[str, str]:
        return {"url": self.url}

    def is_loopback(self) -> bool:
        """Whether the token may go there: plain HTTP to a loopback address, no userinfo."""
        from mplp_lsp.forward.remote import is_loopback_host

        try:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
        except ValueError:
            return False
        return parts.scheme == "http" and "@" not in parts.netloc and is_loopback_host(host)


def read_endpoint(paths: StatePaths) -> Endpoint | None:
    """What a running daemon wrote into ``paths``; None if no API is listening there."""
    try:
        data: Any = json.loads((paths.root / ENDPOINT_NAME).read_text(encoding="utf-8"))
        return Endpoint(str(data["url"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def daemon_api(paths: StatePaths, endpoint: Endpoint) -> tuple[str, str]:
    """The URL and token to ask the daemon behind ``endpoint`` with.

    Raises :class:`ApiRefused` when the URL is not loopback or the token file is not a
    private file of this user's; ``OSError`` when it cannot be read.
    """
    from mplp_lsp.engine.private import NotPrivate, read_private

    if not endpoint.is_loopback():
        raise ApiRefused(f"{paths.root / ENDPOINT_NAME} names a non-loopback address")
    try:
        token = read_private(paths.root / TOKEN_NAME).decode("utf-8", "replace").strip()
    except NotPrivate as refused:
        raise ApiRefused(str(refused)) from None
    return endpoint.url, token

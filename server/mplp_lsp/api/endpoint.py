"""Where a running daemon's API is: the endpoint file in the state dir (no aiohttp here)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mplp_lsp.statedir import StatePaths

TOKEN_NAME = "api-token"  # noqa: S105 - the file name, not a token
ENDPOINT_NAME = "api.json"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    token_file: str

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "token_file": self.token_file}

    def is_loopback(self) -> bool:
        """Whether the token may go there: plain HTTP to a loopback address, no userinfo.

        The endpoint file is only as trustworthy as the state dir; the token never follows
        it anywhere else.
        """
        from mplp_lsp.forward.config import is_loopback_host

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
        return Endpoint(str(data["url"]), str(data["token_file"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None

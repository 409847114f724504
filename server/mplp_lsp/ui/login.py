"""Logging a browser in without putting the bearer token in a URL or in page script.

A client that holds the token (``mplp-lsp ui``, an editor command) asks for a one-time code;
the browser opens ``/ui/login?code=...``, the server takes the code back (once, within
:data:`CODE_TTL`) and answers with a session cookie that page script cannot read. No aiohttp
here: the collector and the daemon share it.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from typing import Final

CODE_TTL: Final = 60.0  # seconds a login code stays valid: long enough to click a link
SESSION_TTL: Final = 12 * 3600.0  # seconds a browser session lasts
_MAX_PENDING: Final = 64  # codes nobody redeemed are dropped oldest first beyond this


class BrowserLogin:
    """One-time login codes and the sessions they open, kept in memory only.

    A restart forgets every session (the daemon's token changes at each start too), so a
    page has to be opened again with a fresh code: nothing long-lived is ever on disk.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._codes: dict[str, float] = {}
        self._sessions: dict[str, float] = {}

    def issue_code(self) -> str:
        self._expire()
        while len(self._codes) >= _MAX_PENDING:
            del self._codes[next(iter(self._codes))]
        code = secrets.token_urlsafe(24)
        self._codes[code] = self._clock() + CODE_TTL
        return code

    def redeem(self, code: str) -> str | None:
        """A new session id for a valid, unused code; None otherwise. The code is spent."""
        self._expire()
        for known in list(self._codes):
            if hmac.compare_digest(known.encode(), code.encode()):
                del self._codes[known]
                session = secrets.token_urlsafe(32)
                self._sessions[session] = self._clock() + SESSION_TTL
                return session
        return None

    def valid_session(self, session: str | None) -> bool:
        if not session:
            return False
        self._expire()
        return any(
            hmac.compare_digest(known.encode(), session.encode()) for known in self._sessions
        )

    def _expire(self) -> None:
        now = self._clock()
        for table in (self._codes, self._sessions):
            for key in [key for key, until in table.items() if until <= now]:
                del table[key]

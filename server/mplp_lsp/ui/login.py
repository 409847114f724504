"""Logging a browser in without putting anything redeemable in a URL, an argv or page script.

A client that holds the token (``mplp-lsp ui``, an editor command) asks for a one-time code
and hands it to the user's browser through a file only the user can read (see
:mod:`mplp_lsp.ui.login_page`), or shows it to be typed. The browser first loads the login
page, which gives it a pre-login nonce (a cookie page script cannot read); the page then
posts the code, and only the code together with that nonce, both unspent and in time, opens
a session. The code alone, taken from anywhere, opens nothing for a client that never loaded
the page, and each nonce gets one try. No aiohttp here: the collector and the daemon share it.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from typing import Final, Protocol

CODE_TTL: Final = 60.0  # seconds a login code stays valid: long enough to open the page
NONCE_TTL: Final = 600.0  # seconds the login page stays usable: long enough to paste a code
SESSION_TTL: Final = 12 * 3600.0  # seconds a browser session lasts
_MAX_PENDING: Final = 64  # codes or nonces nobody used are dropped oldest first beyond this


class _Secrets:
    """Random values with a deadline, looked up in constant time, at most ``_MAX_PENDING``
    of them unless ``bounded`` is false."""

    def __init__(self, ttl: float, clock: Callable[[], float], *, bounded: bool = True) -> None:
        self._ttl = ttl
        self._clock = clock
        self._bounded = bounded
        self._until: dict[str, float] = {}

    def issue(self, size: int) -> str:
        self.expire()
        while self._bounded and len(self._until) >= _MAX_PENDING:
            del self._until[next(iter(self._until))]
        value = secrets.token_urlsafe(size)
        self._until[value] = self._clock() + self._ttl
        return value

    def find(self, offered: str | None) -> str | None:
        """The live value equal to ``offered`` (every one is compared), or None."""
        if not offered:
            return None
        self.expire()
        given = offered.encode()
        found = None
        for known in self._until:
            if hmac.compare_digest(known.encode(), given):
                found = known
        return found

    def spend(self, value: str) -> None:
        self._until.pop(value, None)

    def expire(self) -> None:
        now = self._clock()
        for key in [key for key, until in self._until.items() if until <= now]:
            del self._until[key]


class BrowserLogin:
    """One-time login codes, pre-login nonces and the sessions they open, in memory only.

    A restart forgets every session (the daemon's token changes at each start too), so a
    page has to be opened again with a fresh code: nothing long-lived is ever on disk.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._codes = _Secrets(CODE_TTL, clock)
        self._nonces = _Secrets(NONCE_TTL, clock)
        self._sessions = _Secrets(SESSION_TTL, clock, bounded=False)

    def issue_code(self) -> str:
        return self._codes.issue(24)

    def issue_nonce(self) -> str:
        """A nonce for a browser that opened the login page."""
        return self._nonces.issue(24)

    def redeem(self, code: str, nonce: str | None) -> str | None:
        """A new session id for a valid code offered with a valid nonce; None otherwise.

        The nonce is spent either way (one try per loaded login page); the code only when it
        opens a session.
        """
        known_nonce = self._nonces.find(nonce)
        if known_nonce is None:
            return None
        self._nonces.spend(known_nonce)
        known_code = self._codes.find(code)
        if known_code is None:
            return None
        self._codes.spend(known_code)
        return self._sessions.issue(32)

    def valid_session(self, session: str | None) -> bool:
        return self._sessions.find(session) is not None


class Login(Protocol):
    """What the dashboards' shell needs of a login: codes and nonces (issued and spent by
    handlers), sessions (checked on every request, so synchronously), and cookie names."""

    async def issue_code(self) -> str: ...

    async def issue_nonce(self) -> str: ...

    async def redeem(self, code: str, nonce: str | None) -> str | None: ...

    def valid_session(self, session: str | None) -> bool: ...

    def cookie_name(self, port: int | None, kind: str) -> str: ...


class LocalLogin:
    """The daemon's login: a :class:`BrowserLogin` in this process's memory, with cookies
    named after the port (cookies do not tell ports apart, and two daemons share
    127.0.0.1)."""

    def __init__(self, login: BrowserLogin | None = None) -> None:
        self._login = login or BrowserLogin()

    async def issue_code(self) -> str:
        return self._login.issue_code()

    async def issue_nonce(self) -> str:
        return self._login.issue_nonce()

    async def redeem(self, code: str, nonce: str | None) -> str | None:
        return self._login.redeem(code, nonce)

    def valid_session(self, session: str | None) -> bool:
        return self._login.valid_session(session)

    def cookie_name(self, port: int | None, kind: str) -> str:
        return f"mplp_{kind}_{port or 0}"

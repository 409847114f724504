"""Dashboard logins every instance of the team collector honours (no balancer stickiness).

Login codes and login pages' nonces are one-time values, so they live in the database
(``dashboard_logins``, only their SHA-256): any instance can spend one, once. A code is
spent by the ``DELETE ... RETURNING`` of a transaction that first spends the nonce it came
with, so of two instances given the same code at once exactly one opens a session, and a
nonce gets one try whatever the code. At most 64 unspent codes and 64 unspent nonces are
kept (oldest dropped first): the login page is open to anyone.

Sessions are signed instead (HMAC-SHA256 with a key kept in ``team_meta``, made by the first
instance that needs it): every instance checks one without the database, on every request
of a page, and an instance's restart logs nobody out. A session cannot be revoked before
it expires (12 hours); changing the key (``DELETE FROM team_meta WHERE name =
'session_key'``, then restarting the instances) ends them all.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from mplp_lsp.ui.login import CODE_TTL, NONCE_TTL, SESSION_TTL

__all__ = ["SharedLogin"]

T = TypeVar("T")
Pool = AsyncConnectionPool[AsyncConnection[Any]]
Query = Callable[[Callable[[Pool], Awaitable[T]]], Awaitable[T]]

_MAX_PENDING: Final = 64
_KEY_NAME: Final = "session_key"
_VERSION: Final = "s1"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode(errors="surrogatepass")).hexdigest()


class SharedLogin:
    """``query(work)`` runs ``work(pool)`` within the instance's database bounds."""

    def __init__(self, query: Query[Any], clock: Callable[[], float] = time.time) -> None:
        self._query = query
        self._clock = clock
        self._key: bytes | None = None  # loaded once the database is reached

    async def load_key(self, pool: Pool) -> None:
        """The instances' shared signing key, made by the first one that needs it."""
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO team_meta (name, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (_KEY_NAME, secrets.token_urlsafe(32)),
            )
            cursor = await conn.execute("SELECT value FROM team_meta WHERE name = %s", (_KEY_NAME,))
            row = await cursor.fetchone()
        assert row is not None
        self._key = str(row[0]).encode()

    async def issue_code(self) -> str:
        return await self._issue("code", CODE_TTL)

    async def issue_nonce(self) -> str:
        return await self._issue("nonce", NONCE_TTL)

    async def _issue(self, kind: str, ttl: float) -> str:
        value = secrets.token_urlsafe(24)

        async def keep(pool: Pool) -> None:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(
                    "DELETE FROM dashboard_logins WHERE expires_at < now()"
                    " OR hash IN (SELECT hash FROM dashboard_logins WHERE kind = %s"
                    "  ORDER BY made_at DESC OFFSET %s)",
                    (kind, _MAX_PENDING - 1),
                )
                await conn.execute(
                    "INSERT INTO dashboard_logins (hash, kind, expires_at)"
                    " VALUES (%s, %s, now() + make_interval(secs => %s))",
                    (_digest(value), kind, ttl),
                )

        await self._query(keep)
        return value

    async def redeem(self, code: str, nonce: str | None) -> str | None:
        """A new session for a live code posted with a live nonce; None otherwise. The
        nonce is spent either way, the code only when it opens a session."""
        if not nonce or not code:
            return None

        async def spend(pool: Pool) -> bool:
            async with pool.connection() as conn, conn.transaction():
                for value, kind in ((nonce, "nonce"), (code, "code")):
                    cursor = await conn.execute(
                        "DELETE FROM dashboard_logins WHERE hash = %s AND kind = %s"
                        " AND expires_at > now() RETURNING hash",
                        (_digest(value), kind),
                    )
                    if await cursor.fetchone() is None:
                        return False
                return True

        if not await self._query(spend):
            return None
        return self._sign(int(self._clock() + SESSION_TTL))

    def _sign(self, expires: int) -> str:
        body = f"{_VERSION}.{expires}.{secrets.token_urlsafe(16)}"
        return f"{body}.{self._mac(body)}"

    def _mac(self, body: str) -> str:
        assert self._key is not None, "the key is loaded when the database is reached"
        digest = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def valid_session(self, session: str | None) -> bool:
        if not session or self._key is None or len(session) > 200:
            return False
        body, _, mac = session.rpartition(".")
        version, _, rest = body.partition(".")
        expires, _, _nonce = rest.partition(".")
        if version != _VERSION or not expires.isdigit():
            return False
        return hmac.compare_digest(mac.encode(), self._mac(body).encode()) and (
            int(expires) > self._clock()
        )

    def cookie_name(self, port: int | None, kind: str) -> str:
        """One name on every instance (and any port): the balancer's address is the site.
        The daemon's names and these share their prefixes (``mplp_ui_``, ``mplp_login_``)."""
        return f"mplp_{kind}_team"

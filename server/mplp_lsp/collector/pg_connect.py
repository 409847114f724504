"""How the collector connects to PostgreSQL: no session state, bounded waits, a sized pool.

Every connection may be a PgBouncer in transaction pooling mode, where consecutive
transactions of one client connection run on different server connections. So nothing
outlives a transaction: no startup ``options`` (PgBouncer refuses them), no session
settings (times are read as UTC in Python whatever the server's zone is), no server-side
prepared statements (``prepare_threshold=None``; a prepared name made on one server
connection is unknown, or already taken, on the next), and the ingest's staging table is
made inside each transaction that uses it.

Waits are bounded so a request never hangs on a database that is gone: a connection attempt
gives up after :data:`CONNECT_TIMEOUT_S`, TCP keepalives and ``tcp_user_timeout`` end a
connection whose peer stopped answering, and a request waits at most ``timeout`` for a
pooled connection. Anything the URL sets itself is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

__all__ = ["DEFAULT_POOL_SIZE", "DEFAULT_TIMEOUT_S", "PgOptions", "is_permanent", "url_problem"]

DEFAULT_POOL_SIZE: Final = 8
DEFAULT_TIMEOUT_S: Final = 5.0
CONNECT_TIMEOUT_S: Final = 3  # libpq counts whole seconds, and at least 2
# libpq settings a URL may override; the values bound how long a dead peer goes unnoticed.
_LINK_DEFAULTS: Final = {
    "connect_timeout": str(CONNECT_TIMEOUT_S),
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "3",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",  # ms: data not acknowledged in 10 s ends the connection
}
# SQLSTATE classes and codes no retry can fix: a wrong password or role, no such
# database, no right to create the tables. Anything else (refused, reset, starting up,
# shutting down, too many connections) is waited out.
_PERMANENT_CLASSES: Final = ("28", "42")
_PERMANENT_CODES: Final = frozenset({"3D000"})
# libpq hands a refused login on without its SQLSTATE, only the server's message; these are
# PostgreSQL's own (English) words for the same refusals. A server answering in another
# language has its refusals waited out like an outage (and logged).
_PERMANENT_WORDS: Final = (
    "authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "permission denied",
)


def url_problem(url: str) -> str | None:
    """Why this URL may not be used, or None: a password in it would be in argv and logs."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL URL cannot be parsed"
    if "password" in params:
        return (
            "the PostgreSQL URL has a password in it; put it in PGPASSWORD, a pgpass file "
            "or --db-password-file instead"
        )
    return None


def is_permanent(error: BaseException) -> bool:
    """Whether a failure to reach or set up the database is a configuration error."""
    state = getattr(error, "sqlstate", None)
    if isinstance(state, str):
        return state in _PERMANENT_CODES or state.startswith(_PERMANENT_CLASSES)
    if isinstance(error, psycopg.OperationalError):
        text = str(error)
        return any(words in text for words in _PERMANENT_WORDS)
    return False


@dataclass(frozen=True, slots=True)
class PgOptions:
    """Where the database is and how this instance uses it."""

    url: str
    password: str | None = field(default=None, repr=False)
    pool_size: int = DEFAULT_POOL_SIZE
    timeout: float = DEFAULT_TIMEOUT_S  # the longest a request waits for a connection

    def __post_init__(self) -> None:
        if self.pool_size < 1 or self.timeout <= 0:
            raise ValueError("the pool needs at least one connection and a positive timeout")

    def kwargs(self) -> dict[str, Any]:
        """Connection parameters beside the URL (the URL's own take precedence)."""
        given = conninfo_to_dict(self.url)
        kwargs: dict[str, Any] = {
            "application_name": "mplp-lsp collector",
            "prepare_threshold": None,
        }
        kwargs.update({k: v for k, v in _LINK_DEFAULTS.items() if k not in given})
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs

    async def connect(self) -> AsyncConnection[Any]:
        """One autocommit connection (migrations, the readiness probe)."""
        return await AsyncConnection.connect(self.url, autocommit=True, **self.kwargs())

    def pool(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        """A pool of at most ``pool_size`` connections, not yet open."""
        return AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self.pool_size,
            kwargs=self.kwargs(),
            open=False,
            timeout=self.timeout,
            name="collector",
        )

"""A full disk under the store: recognised wherever it surfaces, logged once per episode.

SQLite reports it as ``SQLITE_FULL`` (``database or disk is full``), a plain write as
``ENOSPC`` or ``EDQUOT``, PostgreSQL (to the team collector) as SQLSTATE ``53100``
(``disk_full``), and the store's writer may hand either on as the cause of its own error.
The HTTP fronts answer 507 with a ValidationResult (``storage_full``) instead of a 500 with
a traceback per request: the first refusal of an episode logs one line, the first success
after it one more, the refusals between them nothing.
"""

from __future__ import annotations

import errno
import logging
import sqlite3

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_PG_DISK_FULL = "53100"  # psycopg errors carry it as ``sqlstate`` (no psycopg import here)
MESSAGE = "the disk holding the store is full; nothing was stored, send it again later"


def is_disk_full(error: BaseException | None) -> bool:
    seen = 0
    while error is not None and seen < 10:  # its causes too; bounded against cycles
        if isinstance(error, sqlite3.Error) and (
            getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "database or disk is full" in str(error)
        ):
            return True
        if isinstance(error, OSError) and error.errno in _FULL_ERRNOS:
            return True
        if getattr(error, "sqlstate", None) == _PG_DISK_FULL:
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


class FullDiskEpisodes:
    """Logs the start and the end of each full-disk episode, once each."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log = log
        self._what = what
        self.full = False
        self.refused = 0  # requests refused in the current episode

    def refused_one(self, error: BaseException) -> None:
        self.refused += 1
        if not self.full:
            self.full = True
            self._log.error(
                "%s: the disk is full (%s); refusing writes with 507 until there is space",
                self._what,
                error,
            )

    def stored(self) -> None:
        if self.full:
            self._log.warning(
                "%s: the disk has space again after %d refused request(s)", self._what, self.refused
            )
            self.full = False
            self.refused = 0

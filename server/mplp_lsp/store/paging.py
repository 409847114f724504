"""The event log a page at a time, in the order the events happened.

``occurred_at`` (the event's own time; the events table in :mod:`mplp_lsp.store.database`)
orders the log for people: ``mplp-lsp events``, the dashboard's timeline and its export all
read it through here. A page is one short read over the ``events_time`` index
``(occurred_at, seq, kind)`` that starts after the last row of the page before, so:

* a page costs its own rows, whatever the log holds (no ``OFFSET``, no sort);
* nothing is held between pages: no read transaction keeps the owner's checkpoints waiting
  while a user pages through ``less``, and memory is one page;
* a reader fixes the rows it pages through with ``upto_seq`` (the newest ``seq`` when it
  began), so events stored meanwhile neither slip into a page already passed nor appear
  twice; they are the ones ``--follow`` prints next, in the order they are stored.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Final

__all__ = [
    "PAGE",
    "Position",
    "Row",
    "Window",
    "last_seq",
    "newest_start",
    "page",
    "pages",
    "stored_after",
]

PAGE: Final = 500

Row = tuple[int, str, str, str, str, str]  # seq, event_id, kind, occurred_at, received_at, body
Position = tuple[str, int]  # (occurred_at, seq) of a row: where a page ended


# eq=False: nothing compares these (what `events` loads: docs/daemon.md).
@dataclass(frozen=True, slots=True, eq=False)
class Window:
    """Which events: of ``kinds`` (None: all), that occurred at or after ``since`` and before
    ``until`` (canonical timestamps), stored up to ``upto_seq``."""

    kinds: tuple[str, ...] | None = None
    since: str | None = None
    until: str | None = None
    upto_seq: int | None = None

    def where(
        self, after: Position | None = None, after_seq: int | None = None
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if after is not None:
            clauses.append("(occurred_at, seq) > (?, ?)")
            params.extend(after)
        if after_seq is not None:
            clauses.append("seq > ?")
            params.append(after_seq)
        if self.since is not None:
            clauses.append("occurred_at >= ?")
            params.append(self.since)
        if self.until is not None:
            clauses.append("occurred_at < ?")
            params.append(self.until)
        if self.upto_seq is not None:
            clauses.append("seq <= ?")
            params.append(self.upto_seq)
        if self.kinds is not None:
            clauses.append(f"kind IN ({', '.join('?' * len(self.kinds))})")
            params.extend(self.kinds)
        # Only constant fragments are joined; every value is a bound parameter.
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


_COLUMNS: Final = "seq, event_id, kind, occurred_at, received_at, body"
# The time index by name: with a kind filter the planner would otherwise take (kind, seq),
# then sort every matching row before returning the first.
_FROM: Final = "FROM events INDEXED BY events_time"


def page(
    conn: sqlite3.Connection, window: Window, after: Position | None = None, size: int = PAGE
) -> list[Row]:
    """The first ``size`` events of ``window`` after ``after``, oldest first."""
    if window.kinds is not None and not window.kinds:
        return []
    where, params = window.where(after)
    sql = f"SELECT {_COLUMNS} {_FROM}{where} ORDER BY occurred_at, seq LIMIT ?"
    rows: list[Row] = conn.execute(sql, [*params, size]).fetchall()
    return rows


def pages(
    conn: sqlite3.Connection,
    window: Window,
    after: Position | None = None,
    *,
    first: int = PAGE,
    size: int = PAGE,
    total: int | None = None,
) -> Iterator[list[Row]]:
    """Every page of ``window`` after ``after``, oldest first, one read each: ``first`` rows,
    then ``size`` at a time, ``total`` rows at most (None: all)."""
    left = total
    wanted = first
    while left is None or left > 0:
        rows = page(conn, window, after, wanted if left is None else min(wanted, left))
        if not rows:
            return
        yield rows
        if left is not None:
            left -= len(rows)
        last = rows[-1]
        after = (last[3], last[0])
        wanted = size


def newest_start(conn: sqlite3.Connection, window: Window, count: int) -> Position | None:
    """Where the newest ``count`` events of ``window`` begin: the position of the event just
    before them (pages start after it), or None when the window holds no more than ``count``.
    Reads ``count`` entries of the index, never a row."""
    if window.kinds is not None and not window.kinds:
        return None
    where, params = window.where(None)
    sql = (
        f"SELECT occurred_at, seq {_FROM}{where}"
        " ORDER BY occurred_at DESC, seq DESC LIMIT 1 OFFSET ?"
    )
    found = conn.execute(sql, [*params, count]).fetchone()
    return None if found is None else (str(found[0]), int(found[1]))


def stored_after(
    conn: sqlite3.Connection, window: Window, after_seq: int, size: int = PAGE
) -> list[Row]:
    """The first ``size`` events of ``window`` stored after ``after_seq``, in the order they
    were stored (what a follower prints as it arrives; ``upto_seq`` does not apply)."""
    if window.kinds is not None and not window.kinds:
        return []
    where, params = replace(window, upto_seq=None).where(after_seq=after_seq)
    sql = f"SELECT {_COLUMNS} FROM events{where} ORDER BY seq LIMIT ?"  # noqa: S608
    rows: list[Row] = conn.execute(sql, [*params, size]).fetchall()
    return rows


def last_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

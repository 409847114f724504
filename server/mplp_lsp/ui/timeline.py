"""The timeline's reads: events counted per lane in time buckets, and the events of a span.

The timeline is in the order events happened: by ``occurred_at``, each event's own time
(:mod:`mplp_lsp.store.paging`), never by arrival. Buckets are prefixes of that canonical
timestamp (``2026-08-01T13:05:09.000Z``): the first 13 characters name the hour, 10 the day,
and so on. Hours and coarser come from ``timeline_hours`` (counts per hour and kind, brought
up to date from the log by :func:`fold`), so a view of months reads a few thousand rows
whatever the log holds; finer units count the events of their range (at most 400 buckets of
10 minutes: under three days) over the ``(occurred_at, seq, kind)`` index, never reading an
event's body. The browser receives at most a few hundred buckets.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from mplp_lsp.store import paging
from mplp_lsp.store.events import canonical_timestamp

# Lanes, one per source; each stored kind belongs to exactly one.
LANES: Final = ("editor", "git", "tools", "ci", "runtime")
LANE_KINDS: Final[dict[str, tuple[str, ...]]] = {
    "editor": ("file_update",),
    "git": ("git",),
    "tools": ("tool",),
    "ci": ("ci", "pipeline_stage"),
    "runtime": ("runtime_execution", "graph_update"),
}
_LANE_OF: Final = {kind: lane for lane, kinds in LANE_KINDS.items() for kind in kinds}


@dataclass(frozen=True, slots=True)
class Unit:
    name: str
    prefix: int  # characters of the canonical timestamp that name one bucket
    seconds: float  # about how long one bucket is


# Finest first; each is a prefix of the canonical timestamp.
UNITS: Final = (
    Unit("second", 19, 1),
    Unit("10 seconds", 18, 10),
    Unit("minute", 16, 60),
    Unit("10 minutes", 15, 600),
    Unit("hour", 13, 3600),
    Unit("day", 10, 86400),
    Unit("month", 7, 30.44 * 86400),
    Unit("year", 4, 365.25 * 86400),
)
MAX_BUCKETS: Final = 400


def parse_instant(value: str) -> str:
    """Any RFC 3339 date-time as the canonical stored form; ValueError if it is not one."""
    return canonical_timestamp(value)


def unit_for(start: str, end: str) -> Unit:
    """The finest unit that splits ``[start, end)`` into at most :data:`MAX_BUCKETS`."""
    span = (_instant(end) - _instant(start)).total_seconds()
    for unit in UNITS:
        if span / unit.seconds <= MAX_BUCKETS:
            return unit
    return UNITS[-1]


def extent(conn: sqlite3.Connection) -> tuple[str, str] | None:
    """The times of the first and last events (two index lookups), or None for an empty log."""
    first = conn.execute("SELECT min(occurred_at) FROM events").fetchone()[0]
    if first is None:
        return None
    last = conn.execute("SELECT max(occurred_at) FROM events").fetchone()[0]
    return str(first), str(last)


ROLLED_KEY: Final = "timeline.rolled_seq"
_HOUR: Final = 13


def behind(conn: sqlite3.Connection) -> bool:
    """Whether events were stored since ``timeline_hours`` was last brought up to date."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (ROLLED_KEY,)).fetchone()
    return last_seq(conn) > int(row[0] if row else 0)


def fold(conn: sqlite3.Connection) -> int:
    """Count the events stored since the last fold into ``timeline_hours`` (in the caller's
    transaction); returns how many were counted."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (ROLLED_KEY,)).fetchone()
    done, last = int(row[0] if row else 0), last_seq(conn)
    if last <= done:
        return 0
    conn.execute(
        "INSERT INTO timeline_hours (hour, kind, count)"
        " SELECT substr(occurred_at, 1, 13), kind, count(*) FROM events"
        " WHERE seq > ? AND seq <= ? GROUP BY 1, 2"
        " ON CONFLICT (hour, kind) DO UPDATE SET count = count + excluded.count",
        (done, last),
    )
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (ROLLED_KEY, str(last)))
    return last - done


def buckets(conn: sqlite3.Connection, start: str, end: str, unit: Unit) -> list[list[Any]]:
    """``[[bucket prefix, count per lane in LANES order], ...]`` for ``[start, end)``.

    In units of an hour or more, the hours that ``start`` and ``end`` fall in are counted
    whole: a bucket is never cut at the range's edge.
    """
    if unit.prefix <= _HOUR:
        rows = conn.execute(
            "SELECT substr(hour, 1, ?) AS bucket, kind, sum(count) FROM timeline_hours"
            " WHERE hour >= ? AND hour <= ? GROUP BY bucket, kind ORDER BY bucket",
            (unit.prefix, start[:_HOUR], end[:_HOUR]),
        )
    else:
        rows = conn.execute(
            "SELECT substr(occurred_at, 1, ?) AS bucket, kind, count(*) FROM events"
            " INDEXED BY events_time"
            " WHERE occurred_at >= ? AND occurred_at < ? GROUP BY bucket, kind ORDER BY bucket",
            (unit.prefix, start, end),
        )
    out: list[list[Any]] = []
    for bucket, kind, count in rows:
        lane = _LANE_OF.get(str(kind))
        if lane is None:
            continue
        if not out or out[-1][0] != bucket:
            out.append([bucket, [0] * len(LANES)])
        out[-1][1][LANES.index(lane)] += int(count)
    return out


def events_in(
    conn: sqlite3.Connection, start: str, end: str, lane: str | None, limit: int
) -> list[dict[str, Any]]:
    """The first ``limit`` events of ``[start, end)`` (of one lane, if given), in the order they
    happened, envelopes in; each with its time of arrival."""
    kinds = LANE_KINDS[lane] if lane is not None else tuple(_LANE_OF)
    window = paging.Window(kinds=kinds, since=start, until=end)
    return [
        {
            "seq": seq,
            "kind": kind,
            "lane": _LANE_OF[kind],
            "timestamp": at,
            "received_at": received_at,
            "body": body,
        }
        for seq, _event_id, kind, at, received_at, body in paging.page(conn, window, size=limit)
    ]


def latest(conn: sqlite3.Connection, after_seq: int, limit: int) -> list[dict[str, Any]]:
    """Events stored after ``after_seq`` (the live feed), without their bodies."""
    rows = conn.execute(
        "SELECT seq, kind, occurred_at FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
        (after_seq, limit),
    )
    return [
        {"seq": seq, "kind": kind, "lane": _LANE_OF.get(kind, "runtime"), "timestamp": at}
        for seq, kind, at in rows
    ]


last_seq = paging.last_seq


def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def shift(value: str, seconds: float) -> str:
    moment = _instant(value) + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

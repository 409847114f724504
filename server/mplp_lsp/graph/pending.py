"""Pending graph events: what a graph write caused, kept until the intake has stored it.

A write records its events here in its own transaction; the service hands them to the
intake and deletes them in the next write's transaction. A crash in between loses none:
they are submitted again at start-up, and the intake drops the ones it already has.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any


def record(conn: sqlite3.Connection, rows: Iterable[tuple[str, str, str]]) -> None:
    """Keep ``(event_id, family, canonical body)`` rows until they are published."""
    conn.executemany("INSERT INTO psg_pending_events (event_id, kind, body) VALUES (?, ?, ?)", rows)


def pending_events(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT body FROM psg_pending_events ORDER BY rowid")
    return [json.loads(body) for (body,) in rows]


def clear(conn: sqlite3.Connection, event_ids: Sequence[str]) -> None:
    conn.executemany("DELETE FROM psg_pending_events WHERE event_id = ?", [(i,) for i in event_ids])

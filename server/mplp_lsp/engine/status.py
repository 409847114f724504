"""What ``mplp-lsp status`` and the editor's status item show, read from the store."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.forward.status import forward_status
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.retention import Policy
from mplp_lsp.store.salvage import read_report


@dataclass(frozen=True, slots=True)
class WorkspaceStatus:
    state_dir: str
    events_by_kind: dict[str, int] = field(default_factory=dict)
    events_total: int = 0
    events_today: int = 0
    rejected: int = 0
    last_event_time: str | None = None
    store_bytes: int = 0
    pending: int = 0
    store_health: str = "ok"  # "degraded" once a damaged store was salvaged
    salvage: dict[str, Any] | None = None
    forward: dict[str, Any] | None = None
    drift: int = 0  # drifted files awaiting a decision (deferred ones not counted)
    drift_deferred: int = 0
    retention: dict[str, Any] | None = None  # mplp_lsp.engine.compaction.plan

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_status(
    conn: sqlite3.Connection,
    paths: StatePaths,
    *,
    pending: int = 0,
    forwarding: dict[str, Any] | None = None,
    retention: Policy | None = None,
) -> WorkspaceStatus:
    from mplp_lsp.engine.compaction import plan

    events = EventLog(conn)
    by_kind = events.counts_by_kind()
    last = events.last_event()
    events_today = events.received_since(datetime.now(UTC).strftime("%Y-%m-%d"))
    return WorkspaceStatus(
        state_dir=str(paths.root),
        events_by_kind=by_kind,
        events_total=sum(by_kind.values()),
        events_today=events_today,
        rejected=events.counters().get("rejected", 0),
        last_event_time=last.timestamp if last else None,
        store_bytes=sum(
            p.stat().st_size
            for p in (paths.database, paths.database.with_name(paths.database.name + "-wal"))
            if p.exists()
        ),
        pending=pending,
        store_health="ok" if (salvage := read_report(conn)) is None else "degraded",
        salvage=salvage,
        forward=forward_status(conn, forwarding),
        retention=None if retention is None else plan(conn, retention),
        **_drift_counts(conn),
    )


def _drift_counts(conn: sqlite3.Connection) -> dict[str, int]:
    from mplp_lsp.drift.records import count

    try:
        drift, deferred = count(conn)
    except sqlite3.OperationalError:  # a store from before drift tracking, opened read-only
        return {}
    return {"drift": drift, "drift_deferred": deferred}

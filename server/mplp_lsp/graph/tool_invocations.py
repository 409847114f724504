"""The state of each tool invocation, rebuilt from its tool_events whatever order they came in.

Events arrive late, twice, or out of order (spec §6.4): a hook's ``running`` can land after
the wrapper's ``succeeded``. The state kept for an invocation is therefore a merge that does
not depend on arrival order: the *latest* report wins, where later means a higher stage
(pending < running < an end state), then a later time, then the status name as a last
tie-break; ``started_at`` is the earliest one reported. Merging is commutative and
idempotent, so any shuffle of any duplicates ends in the same row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.events import StoredEvent, canonical_timestamp
from mplp_lsp.store.writer import StoreWriter

_SELECT = (
    "SELECT tool_id, tool_kind, status, started_at, completed_at, exit_code, output_summary,"
    " reported_at FROM tool_invocations WHERE invocation_id = ?"
)
_INSERT = (
    "INSERT INTO tool_invocations (tool_id, tool_kind, status, started_at, completed_at,"
    " exit_code, output_summary, reported_at, invocation_id) VALUES (?,?,?,?,?,?,?,?,?)"
)
_UPDATE = (
    "UPDATE tool_invocations SET tool_id = ?, tool_kind = ?, status = ?, started_at = ?,"
    " completed_at = ?, exit_code = ?, output_summary = ?, reported_at = ?"
    " WHERE invocation_id = ?"
)
_STAGE = {"pending": 0, "running": 1, "succeeded": 2, "failed": 2, "cancelled": 2}


@dataclass(frozen=True, slots=True)
class Invocation:
    invocation_id: str
    tool_id: str
    tool_kind: str
    status: str
    started_at: str | None
    completed_at: str | None
    exit_code: int | None
    output_summary: str | None
    reported_at: str  # the time of the report that set the status


def _rank(values: Sequence[Any]) -> tuple[int, str, str, int, str, str, str]:
    """Order of reports for one invocation; total, so the winner never depends on arrival."""
    tool_id, tool_kind, status, _, _, exit_code, summary, reported_at = values
    code = -1 if exit_code is None else exit_code
    return (_STAGE.get(status, 0), reported_at, status, code, summary or "", tool_id, tool_kind)


def _canonical(moment: Any) -> str | None:
    try:
        return canonical_timestamp(moment) if isinstance(moment, str) else None
    except ValueError:
        return None


def merge(conn: sqlite3.Connection, event: StoredEvent) -> bool:
    """Fold one tool_event into its invocation's row; True when the row changed."""
    payload = event.envelope["payload"]
    invocation_id = payload["invocation_id"]
    started_at = _canonical(payload.get("started_at"))
    completed_at = _canonical(payload.get("completed_at"))
    reported_at = completed_at or started_at or canonical_timestamp(event.timestamp)
    report = (
        payload["tool_id"],
        payload["tool_kind"],
        payload["status"],
        started_at,
        completed_at,
        payload.get("exit_code"),
        payload.get("output_summary"),
        reported_at,
    )
    row = conn.execute(_SELECT, (invocation_id,)).fetchone()
    if row is None:
        conn.execute(_INSERT, (*report, invocation_id))
        return True
    known = tuple(row)
    merged = report if _rank(report) > _rank(known) else known
    earliest = min((s for s in (known[3], started_at) if s is not None), default=None)
    merged = (*merged[:3], earliest, *merged[4:])
    if merged == known:
        return False
    conn.execute(_UPDATE, (*merged, invocation_id))
    return True


def read_invocation(conn: sqlite3.Connection, invocation_id: str) -> Invocation | None:
    row = conn.execute(_SELECT, (invocation_id,)).fetchone()
    return None if row is None else Invocation(invocation_id, *row)


class ToolInvocations:
    """Bus consumer: keeps ``tool_invocations`` in step with the stored tool_events."""

    def __init__(self, writer: StoreWriter) -> None:
        self._writer = writer

    async def handle(self, events: Sequence[StoredEvent]) -> None:
        tools = [event for event in events if event.kind == Kind.TOOL.value]
        if tools:
            await self._writer.run(lambda conn: [merge(conn, event) for event in tools])

    async def get(self, invocation_id: str) -> Invocation | None:
        return await self._writer.read(lambda conn: read_invocation(conn, invocation_id))

"""The checks every graph write makes before it changes a row, and how it refuses.

A write either applies completely or raises :class:`Rejected`, which rolls the whole
transaction back, so a refused change leaves the graph exactly as it was.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any, Final

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.objects import ObjectKind, validate_object
from mplp_lsp.protocol.result import ErrorCode, ValidationResult


class Rejected(Exception):
    """A write the graph refuses; raising it inside the transaction rolls everything back."""

    def __init__(self, result: ValidationResult) -> None:
        super().__init__("; ".join(f"{e.path}: {e.message}" for e in result.errors))
        self.result = result

    @classmethod
    def single(cls, path: str, code: ErrorCode, message: str) -> Rejected:
        return cls(ValidationResult.single(path, code, message))


def instant(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("z", "Z"))


def require_valid(kind: ObjectKind, data: Any, prefix: str = "") -> dict[str, Any]:
    result = validate_object(kind, data)
    if not result.ok:
        if prefix:
            result = ValidationResult.failure(
                type(issue)(
                    f"{prefix}.{issue.path}" if issue.path else prefix, issue.code, issue.message
                )
                for issue in result.errors
            )
        raise Rejected(result)
    assert isinstance(data, dict)
    return data


def exists(conn: sqlite3.Connection, table: str, column: str, value: str) -> bool:
    # table and column are constants of this module, never input
    sql = f"SELECT 1 FROM {table} WHERE {column} = ?"  # noqa: S608
    return conn.execute(sql, (value,)).fetchone() is not None


ID_TABLES: Final = (
    ("psg_contexts", "context_id"),
    ("psg_plans", "plan_id"),
    ("psg_steps", "step_id"),
    ("psg_confirms", "confirm_id"),
    ("psg_traces", "trace_id"),
    ("psg_trace_segments", "segment_id"),
    ("psg_pipelines", "node_id"),
)


def require_new_id(conn: sqlite3.Connection, path: str, value: str) -> None:
    """Node ids are unique across the whole graph, not per type."""
    for table, column in ID_TABLES:
        if exists(conn, table, column, value):
            raise Rejected.single(path, ErrorCode.DUPLICATE_ID, f"{value} is already a node")


def require_ref(conn: sqlite3.Connection, path: str, table: str, column: str, value: str) -> None:
    if not exists(conn, table, column, value):
        kind = table.removeprefix("psg_").rstrip("s").replace("_segment", " segment")
        raise Rejected.single(
            path, ErrorCode.REFERENCE_UNRESOLVED, f"no {kind} {value} in the graph"
        )


def change_time(path: str, at: str | None, recorded: str, what: str) -> str:
    """The time a change happened; a change older than the recorded state is refused."""
    if at is None:
        return max(utc_timestamp(), recorded)
    try:
        moment = instant(at)
    except ValueError:
        raise Rejected.single(path, ErrorCode.FORMAT, f"{at!r} is not a date-time") from None
    if moment.tzinfo is None:
        raise Rejected.single(path, ErrorCode.FORMAT, f"{at!r} has no UTC offset")
    if moment < instant(recorded):
        raise Rejected.single(
            path,
            ErrorCode.STALE_CHANGE,
            f"{what} changed at {recorded}; a change dated {at} is older and would move it back",
        )
    return utc_timestamp(moment)

"""The protocol-node tables read whole: for tests (equal dumps, identical graphs) and status."""

from __future__ import annotations

import sqlite3
from typing import Final

from mplp_lsp.graph.changes import canonical

PSG_TABLES: Final = (
    "psg_contexts",
    "psg_plans",
    "psg_steps",
    "psg_step_dependencies",
    "psg_confirms",
    "psg_traces",
    "psg_trace_segments",
    "psg_pipelines",
)


def dump(conn: sqlite3.Connection) -> str:
    """Every PSG row in a canonical order: equal strings mean an identical graph."""
    out = []
    for table in PSG_TABLES:
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()  # noqa: S608
        out.append(canonical([table, [list(r) for r in rows]]))
    return "\n".join(out)


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {
        table.removeprefix("psg_"): int(
            conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608
        )
        for table in PSG_TABLES
    }

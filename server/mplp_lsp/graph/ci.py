"""CI pipeline nodes, moved forward by committed ``ci_event`` s (never back by a late one)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mplp_lsp.graph.changes import (
    GraphChange,
    WriteResult,
    finish,
    node,
    pipeline_stage,
    structural,
)
from mplp_lsp.graph.integrity import instant
from mplp_lsp.protocol.envelope import new_id, utc_timestamp

_CI_STAGE: Final = {
    "pending": "pending",
    "running": "running",
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "failed",  # pipeline_stage has no cancelled; the payload keeps the CI word
}
_CI_FINAL: Final = frozenset({"succeeded", "failed", "cancelled"})
_CI_RANK: Final = {"pending": 0, "running": 1, "succeeded": 2, "failed": 2, "cancelled": 2}


@dataclass(frozen=True, slots=True)
class CiRun:
    """A committed ci_event, reduced to what the pipeline node needs."""

    event_id: str
    timestamp: str
    payload: Mapping[str, Any]

    @property
    def happened_at(self) -> str:
        # The run's own clock when it has one: the envelope time is when we heard of it.
        payload = self.payload
        if payload["status"] in _CI_FINAL and payload.get("completed_at"):
            return str(payload["completed_at"])
        if payload["status"] == "running" and payload.get("started_at"):
            return str(payload["started_at"])
        return self.timestamp


def apply_ci(conn: sqlite3.Connection, runs: Sequence[CiRun]) -> WriteResult:
    """Move pipeline nodes forward; a late or out-of-order event never moves one back."""
    events: list[dict[str, Any]] = []
    added: list[GraphChange] = []
    for run in sorted(runs, key=lambda r: instant(r.happened_at)):
        p = run.payload
        key = (p["ci_provider"], p["pipeline_id"], p["run_id"])
        when = utc_timestamp(instant(run.happened_at))
        row = conn.execute(
            "SELECT node_id, status, status_at FROM psg_pipelines"
            " WHERE ci_provider = ? AND pipeline_id = ? AND run_id = ?",
            key,
        ).fetchone()
        if row is None:
            node_id, old = new_id(), None
            conn.execute(
                "INSERT INTO psg_pipelines (node_id, ci_provider, pipeline_id, run_id, status,"
                " status_at, branch_name, commit_id, cause_event_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    node_id,
                    *key,
                    p["status"],
                    when,
                    p.get("branch_name"),
                    p.get("commit_id"),
                    run.event_id,
                ),
            )
            added.append(node("pipeline", node_id))
        else:
            node_id, old, recorded = row
            if (
                old == p["status"]
                or old in _CI_FINAL
                or instant(when) < instant(recorded)
                or _CI_RANK[p["status"]] < _CI_RANK[old]
            ):
                continue  # already known, final, or older: placed on the timeline, no move
            conn.execute(
                "UPDATE psg_pipelines SET status = ?, status_at = ?, cause_event_id = ?"
                " WHERE node_id = ?",
                (p["status"], when, run.event_id, node_id),
            )
        events.append(
            pipeline_stage(
                pipeline_id=node_id,
                stage_id=str(p["run_id"]),
                stage_status=_CI_STAGE[p["status"]],
                event_type="ci_pipeline_status_changed",
                timestamp=when,
                stage_name=str(p["pipeline_id"]),
                stage_order=None,
                payload={
                    "object_type": "pipeline",
                    "ci_provider": p["ci_provider"],
                    "ci_pipeline_id": p["pipeline_id"],
                    "run_id": p["run_id"],
                    "from": old,
                    "to": p["status"],
                    "cause_event_id": run.event_id,
                },
                source_module="ci",
            )
        )
    if added:
        events.insert(0, structural(conn, "pipeline_created", added, source_module="ci"))
    return finish(conn, None, events)

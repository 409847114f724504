"""Step status changes: a step moves only as its plan and its dependencies allow."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from mplp_lsp.graph.changes import WriteResult, finish, pipeline_stage
from mplp_lsp.graph.integrity import Rejected, change_time
from mplp_lsp.plans import transitions as lifecycle
from mplp_lsp.protocol.result import ErrorCode


def set_step_status(
    conn: sqlite3.Connection, plan_id: str, step_id: str, status: Any, at: str | None = None
) -> WriteResult:
    plan = conn.execute(
        "SELECT status, context_id FROM psg_plans WHERE plan_id = ?", (plan_id,)
    ).fetchone()
    if plan is None:
        raise Rejected.single("plan_id", ErrorCode.NOT_FOUND, f"no plan {plan_id}")
    row = conn.execute(
        "SELECT status, status_at, position, body FROM psg_steps WHERE step_id = ? AND plan_id = ?",
        (step_id, plan_id),
    ).fetchone()
    if row is None:
        raise Rejected.single(
            "step_id", ErrorCode.NOT_FOUND, f"plan {plan_id} has no step {step_id}"
        )
    if not isinstance(status, str):
        raise Rejected.single("status", ErrorCode.TYPE, "status must be a string")
    old, recorded, position, body = row
    deps = dict(
        conn.execute(
            "SELECT d.depends_on, s.status FROM psg_step_dependencies d"
            " JOIN psg_steps s ON s.step_id = d.depends_on WHERE d.step_id = ?",
            (step_id,),
        ).fetchall()
    )
    result = lifecycle.check_step(old, status, plan_status=plan[0], dependency_states=deps)
    if not result.ok:
        raise Rejected(result)
    when = change_time("timestamp", at, recorded, f"step {step_id}")
    event = move_step(conn, plan_id, plan[1], step_id, old, status, when, position, body)
    # The step, not the whole plan: a plan may hold thousands of steps.
    return finish(conn, {**json.loads(body), "status": status}, [event])


_STEP_EVENT_TYPES: Final = {
    "in_progress": "step_started",
    "completed": "step_completed",
    "failed": "step_failed",
}


def move_step(
    conn: sqlite3.Connection,
    plan_id: str,
    context_id: str,
    step_id: str,
    old: str,
    new: str,
    when: str,
    position: int,
    body: str,
    reason: str | None = None,
) -> dict[str, Any]:
    conn.execute(
        "UPDATE psg_steps SET status = ?, status_at = ? WHERE step_id = ?", (new, when, step_id)
    )
    step = json.loads(body)
    payload: dict[str, Any] = {
        "object_type": "step",
        "plan_id": plan_id,
        "step_id": step_id,
        "context_id": context_id,
        "from": old,
        "to": new,
    }
    if reason:
        payload["reason"] = reason
    return pipeline_stage(
        pipeline_id=plan_id,
        stage_id=step_id,
        stage_status=lifecycle.STEP_STAGE[new],
        event_type=_STEP_EVENT_TYPES.get(new, "step_status_changed"),
        timestamp=when,
        stage_name=step.get("description"),
        stage_order=step.get("order_index", position),
        payload=payload,
        source_module="plan",
    )

"""Plan nodes and their steps: created as a DAG of pending steps, moved through their lifecycle.

A new plan starts ``draft`` with every step ``pending``; its context must exist, its step ids
are new, its dependencies name steps of the same plan and form no cycle. Status changes pass
:mod:`mplp_lsp.plans.transitions`, and a change older than the recorded one never moves the
plan backwards.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mplp_lsp.graph.changes import (
    WriteResult,
    canonical,
    edge,
    finish,
    node,
    pipeline_stage,
    structural,
)
from mplp_lsp.graph.integrity import (
    Rejected,
    change_time,
    require_new_id,
    require_ref,
    require_valid,
)
from mplp_lsp.graph.steps import move_step
from mplp_lsp.plans import transitions as lifecycle
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.objects import ObjectKind
from mplp_lsp.protocol.result import ErrorCode


def create_plan(conn: sqlite3.Connection, data: Any) -> WriteResult:
    plan = require_valid(ObjectKind.PLAN, data)
    plan_id, context_id, steps = plan["plan_id"], plan["context_id"], plan["steps"]
    if plan["status"] != lifecycle.INITIAL["plan"]:
        raise Rejected.single(
            "status", ErrorCode.INITIAL_STATUS, f"a new plan starts as draft, not {plan['status']}"
        )
    require_new_id(conn, "plan_id", plan_id)
    require_ref(conn, "context_id", "psg_contexts", "context_id", context_id)
    ids = [step["step_id"] for step in steps]
    for index, step in enumerate(steps):
        path = f"steps[{index}]"
        if step["status"] != lifecycle.INITIAL["step"]:
            raise Rejected.single(
                f"{path}.status",
                ErrorCode.INITIAL_STATUS,
                f"a new step starts as pending, not {step['status']}",
            )
        if step["step_id"] == plan_id or ids.index(step["step_id"]) != index:
            raise Rejected.single(
                f"{path}.step_id",
                ErrorCode.DUPLICATE_ID,
                f"{step['step_id']} is used twice in this plan",
            )
        require_new_id(conn, f"{path}.step_id", step["step_id"])
        for dep_index, dep in enumerate(step.get("dependencies", ())):
            if dep not in ids:
                raise Rejected.single(
                    f"{path}.dependencies[{dep_index}]",
                    ErrorCode.DEPENDENCY_OUTSIDE_PLAN,
                    f"step {step['step_id']} depends on {dep}, which is not a step of this plan",
                )
    cycle = find_cycle({step["step_id"]: step.get("dependencies", []) for step in steps})
    if cycle:
        raise Rejected.single(
            "steps",
            ErrorCode.DEPENDENCY_CYCLE,
            "the steps depend on each other in a cycle: " + " → ".join(cycle),
        )
    now = utc_timestamp()
    body = {k: v for k, v in plan.items() if k not in ("status", "steps")}
    conn.execute(
        "INSERT INTO psg_plans (plan_id, context_id, status, status_at, created_at, body)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (plan_id, context_id, plan["status"], now, now, canonical(body)),
    )
    changes = [node("plan", plan_id), edge("belongs_to", plan_id, context_id)]
    for position, step in enumerate(steps):
        step_body = {k: v for k, v in step.items() if k != "status"}
        conn.execute(
            "INSERT INTO psg_steps (step_id, plan_id, position, status, status_at, body)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (step["step_id"], plan_id, position, step["status"], now, canonical(step_body)),
        )
        changes += [node("step", step["step_id"]), edge("belongs_to", step["step_id"], plan_id)]
    for step in steps:
        for dep in dict.fromkeys(step.get("dependencies", ())):
            conn.execute(
                "INSERT INTO psg_step_dependencies (step_id, depends_on) VALUES (?, ?)",
                (step["step_id"], dep),
            )
            changes.append(edge("depends_on", step["step_id"], dep))
    event = structural(conn, "plan_created", changes, source_module="plan")
    return finish(conn, get_plan(conn, plan_id), [event])


def find_cycle(dependencies: Mapping[str, Sequence[str]]) -> list[str]:
    """A dependency cycle as ``[a, b, ..., a]``, or ``[]`` if the steps form a DAG."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in dependencies:
        if state.get(start):
            continue
        path: list[str] = []
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(dependencies.get(start, ())))]
        state[start] = 1
        path.append(start)
        while stack:
            current, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[current] = 2
            elif state.get(child) == 1:
                return [*path[path.index(child) :], child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(dependencies.get(child, ()))))
    return []


def get_plan(conn: sqlite3.Connection, plan_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT status, body FROM psg_plans WHERE plan_id = ?", (plan_id,)
    ).fetchone()
    if row is None:
        return None
    plan: dict[str, Any] = json.loads(row[1])
    plan["status"] = row[0]
    steps = []
    for status, body in conn.execute(
        "SELECT status, body FROM psg_steps WHERE plan_id = ? ORDER BY position", (plan_id,)
    ):
        step = json.loads(body)
        step["status"] = status
        steps.append(step)
    plan["steps"] = steps
    return plan


def awaiting_confirms(conn: sqlite3.Connection, plan_id: str) -> list[tuple[str, str]]:
    """``(confirm_id, status)`` of the Confirms that hold the plan's approval back."""
    rows = conn.execute(
        "SELECT confirm_id, status FROM psg_confirms WHERE target_type = 'plan'"
        " AND target_id = ? ORDER BY rowid",
        (plan_id,),
    )
    return [(c, status) for c, status in rows if status in lifecycle.CONFIRM_AWAITING]


def set_plan_status(
    conn: sqlite3.Connection,
    plan_id: str,
    status: Any,
    at: str | None = None,
    *,
    confirm_id: str | None = None,
) -> WriteResult:
    """Move a plan; ``confirm_id`` when the move is that Confirm's decision.

    A plan a Confirm asks approval for is approved by that Confirm's decision only
    (:func:`mplp_lsp.graph.confirms.decide_confirm`), not by setting its status.
    """
    row = conn.execute(
        "SELECT status, status_at, context_id, body FROM psg_plans WHERE plan_id = ?", (plan_id,)
    ).fetchone()
    if row is None:
        raise Rejected.single("plan_id", ErrorCode.NOT_FOUND, f"no plan {plan_id}")
    old, recorded, context_id, body = row
    if not isinstance(status, str):
        raise Rejected.single("status", ErrorCode.TYPE, "status must be a string")
    steps = conn.execute(
        "SELECT step_id, status, status_at, position, body FROM psg_steps WHERE plan_id = ?"
        " ORDER BY position",
        (plan_id,),
    ).fetchall()
    result = lifecycle.check_plan(old, status, [s[1] for s in steps])
    if not result.ok:
        raise Rejected(result)
    awaiting = awaiting_confirms(conn, plan_id) if status == "approved" else []
    if awaiting and confirm_id is None:
        named = ", ".join(f"{c} ({s})" for c, s in awaiting)
        raise Rejected.single(
            "status",
            ErrorCode.TRANSITION_PRECONDITION,
            f"plan {old} → approved: the plan is approved through its Confirm {named}",
        )
    when = change_time("timestamp", at, recorded, f"plan {plan_id}")
    conn.execute(
        "UPDATE psg_plans SET status = ?, status_at = ? WHERE plan_id = ?", (status, when, plan_id)
    )
    title = json.loads(body).get("title")
    events = [
        pipeline_stage(
            pipeline_id=plan_id,
            stage_id=plan_id,
            stage_status=lifecycle.PLAN_STAGE[status],
            event_type="plan_status_changed",
            timestamp=when,
            stage_name=title,
            stage_order=None,
            payload={
                "object_type": "plan",
                "plan_id": plan_id,
                "context_id": context_id,
                "from": old,
                "to": status,
                **({"confirm_id": confirm_id} if confirm_id else {}),
            },
            source_module="plan",
        )
    ]
    if status in ("failed", "cancelled"):
        # A step runs only while its plan does: the plan's running steps fail with it.
        for step_id, step_status, _at, position, step_body in steps:
            if step_status == "in_progress":
                events.append(
                    move_step(
                        conn,
                        plan_id,
                        context_id,
                        step_id,
                        step_status,
                        "failed",
                        when,
                        position,
                        step_body,
                        reason=f"plan {status}",
                    )
                )
    return finish(conn, get_plan(conn, plan_id), events)

"""Confirm nodes: a request for approval of a context, plan or trace, and its decisions.

A Confirm starts ``pending``. Each decision (``approved``, ``rejected`` or ``cancelled``, by a
role, with a reason) is appended to its ``decisions`` and moves it through
:data:`mplp_lsp.plans.transitions.CONFIRM_TRANSITIONS`; the plan it targets moves with it in
the same transaction, as upstream golden FLOW-05 does: an approval takes the proposed plan to
``approved``, a rejection sends it back to ``draft`` (to be revised and proposed again, and
the same Confirm decided again). A plan a Confirm awaits is approved by nothing else.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from mplp_lsp.graph.changes import (
    GraphChange,
    WriteResult,
    canonical,
    edge,
    finish,
    node,
    structural,
)
from mplp_lsp.graph.integrity import (
    Rejected,
    require_new_id,
    require_ref,
    require_valid,
)
from mplp_lsp.graph.plans import set_plan_status
from mplp_lsp.plans import transitions as lifecycle
from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.objects import ObjectKind
from mplp_lsp.protocol.result import ErrorCode

_TARGETS: Final = {
    "context": ("psg_contexts", "context_id"),
    "plan": ("psg_plans", "plan_id"),
    "trace": ("psg_traces", "trace_id"),
}


def create_confirm(conn: sqlite3.Connection, data: Any) -> WriteResult:
    confirm = require_valid(ObjectKind.CONFIRM, data)
    confirm_id, target_type, target_id = (
        confirm["confirm_id"],
        confirm["target_type"],
        confirm["target_id"],
    )
    require_new_id(conn, "confirm_id", confirm_id)
    if confirm["status"] != lifecycle.INITIAL["confirm"]:
        raise Rejected.single(
            "status",
            ErrorCode.INITIAL_STATUS,
            f"a new confirm starts as pending, not {confirm['status']}; decide it afterwards",
        )
    if target_type not in _TARGETS:
        raise Rejected.single(
            "target_type",
            ErrorCode.REFERENCE_UNRESOLVED,
            f"the graph holds no {target_type} nodes to confirm",
        )
    require_ref(conn, "target_id", *_TARGETS[target_type], target_id)
    body = {k: v for k, v in confirm.items() if k != "status"}
    conn.execute(
        "INSERT INTO psg_confirms (confirm_id, target_type, target_id, status, body)"
        " VALUES (?, ?, ?, ?, ?)",
        (confirm_id, target_type, target_id, confirm["status"], canonical(body)),
    )
    changes = [node("confirm", confirm_id), edge("targets", confirm_id, target_id)]
    event = structural(conn, "confirm_created", changes, source_module="confirm")
    return finish(conn, confirm, [event])


def get_confirm(conn: sqlite3.Connection, confirm_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT status, body FROM psg_confirms WHERE confirm_id = ?", (confirm_id,)
    ).fetchone()
    if row is None:
        return None
    confirm: dict[str, Any] = json.loads(row[1])
    confirm["status"] = row[0]
    return confirm


def decide_confirm(conn: sqlite3.Connection, confirm_id: str, data: Any) -> WriteResult:
    """Append one decision; the Confirm and the plan it targets move accordingly."""
    row = conn.execute(
        "SELECT status, target_type, target_id, body FROM psg_confirms WHERE confirm_id = ?",
        (confirm_id,),
    ).fetchone()
    if row is None:
        raise Rejected.single("confirm_id", ErrorCode.NOT_FOUND, f"no confirm {confirm_id}")
    old, target_type, target_id, body = row
    if not isinstance(data, dict):
        raise Rejected.single("decision", ErrorCode.TYPE, "the decision must be a JSON object")
    decision = {"decision_id": new_id(), "decided_at": utc_timestamp(), **data}
    stored = json.loads(body)
    decisions = [*stored.get("decisions", []), decision]
    confirm = {**stored, "status": decision.get("status"), "decisions": decisions}
    require_valid(ObjectKind.CONFIRM, confirm)  # the decision's shape, at decisions[n]
    status = confirm["status"]
    if status == "rejected" and not str(decision.get("reason", "")).strip():
        raise Rejected.single(
            f"decisions[{len(decisions) - 1}].reason",
            ErrorCode.REQUIRED,
            "a rejection gives its reason (what to change before the next proposal)",
        )
    result = lifecycle.check_table("confirm", old, status)
    if not result.ok:
        raise Rejected(result)
    if decision["decision_id"] in {d.get("decision_id") for d in decisions[:-1]}:
        raise Rejected.single(
            f"decisions[{len(decisions) - 1}].decision_id",
            ErrorCode.DUPLICATE_ID,
            f"decision {decision['decision_id']} is already recorded",
        )
    moved = _move_target(conn, confirm_id, target_type, target_id, status)
    conn.execute(
        "UPDATE psg_confirms SET status = ?, body = ? WHERE confirm_id = ?",
        (status, canonical({k: v for k, v in confirm.items() if k != "status"}), confirm_id),
    )
    change = GraphChange("node_update", node_type="confirm", node_id=confirm_id)
    event = structural(conn, "confirm_decided", [change], source_module="confirm")
    event["payload"].update(
        {
            "from": old,
            "to": status,
            "decision_id": decision["decision_id"],
            "decided_by_role": decision["decided_by_role"],
            "target_id": target_id,
        }
    )
    # The plan's own events were recorded by its move; both reach the intake.
    return WriteResult(finish(conn, confirm, [event]).value, [*moved, event])


def _move_target(
    conn: sqlite3.Connection, confirm_id: str, target_type: str, target_id: str, decided: str
) -> list[dict[str, Any]]:
    """The targeted plan's move for a decision (its events); other targets only record it."""
    if target_type != "plan" or decided == "cancelled":
        return []
    (plan_status,) = conn.execute(
        "SELECT status FROM psg_plans WHERE plan_id = ?", (target_id,)
    ).fetchone()
    if decided == "rejected" and plan_status == "draft":
        return []  # already back for revision: a second opinion does not move it
    if plan_status != "proposed":
        raise Rejected.single(
            "status",
            ErrorCode.TRANSITION_PRECONDITION,
            f"confirm {confirm_id} decides on a proposed plan; plan {target_id} is {plan_status}",
        )
    to = "approved" if decided == "approved" else "draft"
    return set_plan_status(conn, target_id, to, confirm_id=confirm_id).events

"""Confirm nodes: a request for approval of a context, plan or trace."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from mplp_lsp.protocol.objects import ObjectKind
from mplp_lsp.protocol.result import ErrorCode
from mplp_lsp.runtime.psg.changes import WriteResult, canonical, edge, finish, node, structural
from mplp_lsp.runtime.psg.integrity import (
    Rejected,
    require_new_id,
    require_ref,
    require_valid,
)

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

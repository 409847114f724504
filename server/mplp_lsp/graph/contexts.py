"""Context nodes: the root every plan and trace belongs to."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from mplp_lsp.graph.changes import WriteResult, canonical, finish, node, structural
from mplp_lsp.graph.integrity import require_new_id, require_valid
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.objects import ObjectKind


def create_context(conn: sqlite3.Connection, data: Any) -> WriteResult:
    context = require_valid(ObjectKind.CONTEXT, data)
    context_id = context["context_id"]
    require_new_id(conn, "context_id", context_id)
    body = {k: v for k, v in context.items() if k != "status"}
    conn.execute(
        "INSERT INTO psg_contexts (context_id, status, created_at, body) VALUES (?, ?, ?, ?)",
        (context_id, context["status"], utc_timestamp(), canonical(body)),
    )
    event = structural(
        conn, "context_created", [node("context", context_id)], source_module="context"
    )
    return finish(conn, context, [event])


def get_context(conn: sqlite3.Connection, context_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT status, body FROM psg_contexts WHERE context_id = ?", (context_id,)
    ).fetchone()
    if row is None:
        return None
    context: dict[str, Any] = json.loads(row[1])
    context["status"] = row[0]
    return context

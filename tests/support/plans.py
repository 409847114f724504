"""Plan and context documents a test runs, valid under the MPLP schemas."""

from __future__ import annotations

import json
from typing import Any

from mplp_lsp.protocol.envelope import new_id
from tests.support.http_api import Api

META = {"protocol_version": "1.0.0", "schema_version": "1.0.0"}


def context_doc(context_id: str | None = None) -> dict[str, Any]:
    return {
        "meta": META,
        "context_id": context_id or new_id(),
        "root": {"domain": "software", "environment": "dev"},
        "title": "Parser work",
        "status": "active",
    }


def plan_doc(context_id: str, steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if steps is None:
        first = new_id()
        steps = [
            {"step_id": first, "description": "Write the parser", "status": "pending"},
            {
                "step_id": new_id(),
                "description": "Test the parser",
                "status": "pending",
                "dependencies": [first],
            },
        ]
    return {
        "meta": META,
        "plan_id": new_id(),
        "context_id": context_id,
        "title": "Parser",
        "objective": "Parse the input",
        "status": "draft",
        "steps": steps,
    }


def confirm_doc(plan_id: str) -> dict[str, Any]:
    return {
        "meta": META,
        "confirm_id": new_id(),
        "target_type": "plan",
        "target_id": plan_id,
        "status": "pending",
        "requested_by_role": "migration_agent",
        "requested_at": "2026-03-02T08:00:00Z",
        "reason": "The schema migration drops a column",
    }


async def run(api: Api, plan_id: str, body: Any) -> tuple[int, list[dict[str, Any]]]:
    """POST the run route; its answer as JSON lines (one line for a refusal)."""
    async with api.session.post(
        f"{api.server.url}/psg/plans/{plan_id}/run", json=body, headers=api.headers
    ) as response:
        text = await response.text()
    return response.status, [json.loads(line) for line in text.splitlines()]

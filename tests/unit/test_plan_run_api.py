"""``POST /psg/plans/{plan_id}/run`` on the real loopback API: refusals, the stream, a leaving client."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from mplp_lsp.protocol.envelope import new_id
from tests.unit.test_confirm_flow import run
from tests.unit.test_http_api import Api, api, context_doc, plan_doc

__all__ = ["api"]  # the fixture


def documents() -> tuple[dict[str, Any], dict[str, Any]]:
    context = context_doc()
    return context, plan_doc(context["context_id"])


@pytest.mark.parametrize(
    ("body", "path", "code"),
    [
        ([], "", "type"),
        ({"plan_file": "/etc/passwd"}, "plan_file", "extra_forbidden"),
        ({"plan": {"plan_id": new_id()}}, "plan.plan_id", "reference_unresolved"),
        ({"executor": "shell"}, "executor", "enum"),
        ({"actions": ["rm -rf /"]}, "actions", "type"),
    ],
)
async def test_a_malformed_run_request_is_refused(
    api: Api, body: Any, path: str, code: str
) -> None:
    _context, plan = documents()
    before = await api.dump()
    status, lines = await run(api, plan["plan_id"], body)
    assert status == 422
    assert [(e["path"], e["code"]) for e in lines[0]["errors"]] == [(path, code)]
    assert await api.dump() == before


async def test_an_unknown_plan_is_not_found(api: Api) -> None:
    status, lines = await run(api, new_id(), {})
    assert (status, lines[0]["errors"][0]["code"]) == (404, "not_found")


async def test_a_failing_step_streams_its_events_and_a_failed_result(api: Api) -> None:
    context, plan = documents()
    second = plan["steps"][1]["step_id"]
    fails = {"type": "tool", "argv": [sys.executable, "-c", "raise SystemExit(3)"]}
    body = {"plan": plan, "context": context, "executor": "workspace", "actions": {second: fails}}
    status, lines = await run(api, plan["plan_id"], body)
    assert status == 200
    *events, last = lines
    assert last["result"]["success"] is False
    assert last["result"]["error"]["errors"][0]["code"] == "tool_failed"
    assert last["result"]["execution"]["failed_step"] == second
    kinds = {line["event"]["kind"] for line in events}
    assert {"tool", "runtime_execution", "pipeline_stage"} <= kinds
    assert (await api.call("GET", f"/psg/plans/{plan['plan_id']}"))[1]["status"] == "failed"


async def test_the_run_goes_on_when_the_client_leaves(api: Api) -> None:
    context, plan = documents()
    first = plan["steps"][0]["step_id"]
    slow = {"type": "tool", "argv": [sys.executable, "-c", "import time; time.sleep(1)"]}
    body = {"plan": plan, "context": context, "executor": "workspace", "actions": {first: slow}}
    async with api.session.post(
        f"{api.server.url}/psg/plans/{plan['plan_id']}/run", json=body, headers=api.headers
    ) as response:
        assert response.status == 200
        assert "event" in json.loads(await response.content.readline())
        response.close()  # gone before the slow step ends
    plan_path = f"/psg/plans/{plan['plan_id']}"
    for _ in range(600):
        if (await api.call("GET", plan_path))[1].get("status") == "completed":
            break
        await asyncio.sleep(0.1)
    assert (await api.call("GET", plan_path))[1]["status"] == "completed"

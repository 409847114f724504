"""``POST /psg/plans/{plan_id}/run`` on the real loopback API: refusals, the stream, a leaving client."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import aiohttp
import pytest

from mplp_lsp.plans.runs import PlanRunRequest
from mplp_lsp.protocol.envelope import new_id
from mplp_lsp.store.events import StoredEvent
from tests.conftest import sample
from tests.support.http_api import Api, api
from tests.support.plans import context_doc, plan_doc, run

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


def gated_tool(gate: str) -> dict[str, Any]:
    """A step that runs until the test creates ``gate`` in the workspace: no sleeps to tune."""
    wait = f"import os, time\nwhile not os.path.exists({gate!r}): time.sleep(0.02)"
    return {"type": "tool", "argv": [sys.executable, "-c", wait]}


async def test_events_stream_while_the_run_goes_on_and_after_the_client_leaves(api: Api) -> None:
    context, plan = documents()
    first = plan["steps"][0]["step_id"]
    body = {
        "plan": plan,
        "context": context,
        "executor": "workspace",
        "actions": {first: gated_tool("go")},
    }
    plan_path = f"/psg/plans/{plan['plan_id']}"
    async with api.session.post(
        f"{api.server.url}{plan_path}/run", json=body, headers=api.headers
    ) as response:
        assert response.status == 200
        # Streamed: the first event arrives while the first step waits for the gate (a
        # route that answered at the end would never answer: the gate opens after this).
        first_line = await asyncio.wait_for(response.content.readline(), 60)
        assert "event" in json.loads(first_line)
        assert (await api.call("GET", plan_path))[1].get("status") != "completed"
        response.close()  # the client leaves before the run ends
    (api.workspace.root / "go").touch()
    for _ in range(600):
        if (await api.call("GET", plan_path))[1].get("status") == "completed":
            break
        await asyncio.sleep(0.1)
    assert (await api.call("GET", plan_path))[1]["status"] == "completed"


async def test_what_others_submit_during_a_run_is_not_its_progress(api: Api) -> None:
    context, plan = documents()
    first = plan["steps"][0]["step_id"]
    request = PlanRunRequest(plan, context, {first: gated_tool("go")}, "workspace")
    seen: list[StoredEvent] = []
    running = asyncio.create_task(
        api.workspace.owner.plans.run(request, plan["plan_id"], seen.extend)
    )
    for _ in range(3000):  # until the run is under way (its first status change)
        if any(e.kind == "pipeline_stage" for e in seen):
            break
        await asyncio.sleep(0.02)
    (api.workspace.root / "elsewhere.txt").write_text("saved in the editor\n")
    saved = sample("file_update") | {"file_path": "elsewhere.txt"}
    status, body = await api.call("POST", "/integration/file", saved)
    assert status == 202, body
    (api.workspace.root / "go").touch()
    result = await running
    assert result.summary is not None and result.summary["success"], result.to_json()
    assert body["event_id"] not in {e.event_id for e in seen}
    assert body["event_id"] in {e["event_id"] for e in await api.events("file_update")}


async def test_stopping_the_api_stops_a_streaming_run_instead_of_waiting_for_it(
    api: Api,
) -> None:
    context, plan = documents()
    first = plan["steps"][0]["step_id"]
    body = {
        "plan": plan,
        "context": context,
        "executor": "workspace",
        "actions": {first: gated_tool("never")},
    }
    async with api.session.post(
        f"{api.server.url}/psg/plans/{plan['plan_id']}/run", json=body, headers=api.headers
    ) as response:
        await asyncio.wait_for(response.content.readline(), 60)
        # aiohttp would wait 60 s for the handler; the run is cancelled instead.
        await asyncio.wait_for(api.server.stop(), 30)
        with pytest.raises(aiohttp.ClientPayloadError):  # cut off, never a result line
            await response.content.read()
    stored = await api.workspace.psg.get_plan(plan["plan_id"])
    assert stored is None or stored["status"] != "completed"  # stopped where it was


async def test_a_bug_in_a_run_is_one_logged_refusal_not_a_traceback(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*_args: Any) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(api.workspace.owner.plans, "run", broken)
    _context, plan = documents()
    status, lines = await run(api, plan["plan_id"], {"plan": plan})
    assert (status, lines[0]["errors"][0]["code"]) == (422, "action_failed")
    assert "Traceback" not in json.dumps(lines)
    assert "stopped on an internal error" in caplog.text

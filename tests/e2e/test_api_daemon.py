"""The HTTP API inside real daemons: ``mplp-lsp watch`` and ``mplp-lsp serve``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mplp_lsp.protocol.envelope import new_id
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from tests.e2e.harness import lsp_session
from tests.support.daemon import cli, start_watch, stop, wait_for_api
from tests.support.plans import context_doc, plan_doc


async def lifecycle(url: str, token: str) -> int:
    """Create context → plan → approve → start → run the steps → complete; count changes."""
    headers = {"Authorization": f"Bearer {token}"}
    context = context_doc()
    plan = plan_doc(context["context_id"])
    plan_id = plan["plan_id"]
    changes = [
        (f"/psg/plans/{plan_id}/status", status)
        for status in ("proposed", "approved", "in_progress")
    ]
    for step in plan["steps"]:
        changes += [
            (f"/psg/plans/{plan_id}/steps/{step['step_id']}/status", status)
            for status in ("in_progress", "completed")
        ]
    changes.append((f"/psg/plans/{plan_id}/status", "completed"))
    async with aiohttp.ClientSession(headers=headers) as session:
        for path, body in (("/psg/contexts", context), ("/psg/plans", plan)):
            async with session.post(url + path, json=body) as response:
                assert response.status == 201, await response.text()
        for path, status in changes:
            async with session.patch(url + path, json={"status": status}) as response:
                assert response.status == 200, await response.text()
        async with session.patch(
            url + f"/psg/plans/{plan_id}/status", json={"status": "draft"}
        ) as response:
            assert response.status == 409
    return len(changes)


def stored(state_dir: Path, workspace: Path, kind: str) -> list[dict[str, Any]]:
    done = cli(
        "events",
        "--json",
        "--kind",
        kind,
        "--state-dir",
        str(state_dir),
        "--workspace",
        str(workspace),
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


async def test_watch_serves_the_api_and_its_events_reach_the_store(tmp_path: Path) -> None:
    workspace, state_dir = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    daemon = await start_watch(workspace, state_dir)
    try:
        api = await wait_for_api(state_dir, workspace)
        assert api["url"].startswith("http://127.0.0.1:")
        token = Path(api["token_file"]).read_text()
        changes = await lifecycle(api["url"], token)
    finally:
        err = await stop(daemon)
    assert daemon.returncode == 0, err
    report = json.loads(
        cli("status", "--json", "--state-dir", str(state_dir), "--workspace", str(workspace)).stdout
    )
    assert report["api"] is None  # gone with the daemon
    assert not Path(api["token_file"]).exists()
    stages = stored(state_dir, workspace, "pipeline_stage")
    updates = stored(state_dir, workspace, "graph_update")
    assert len(stages) == changes
    assert [e["event_type"] for e in updates] == ["context_created", "plan_created"]
    for event in stages + updates:
        assert validate(Kind(event["event_family"]), event).ok


async def test_serve_answers_psg_requests_and_serves_the_api(tmp_path: Path) -> None:
    workspace, state_dir = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    async with lsp_session(workspace, state_dir, client_name="neovim") as session:
        context = context_doc()
        answer = await session.client.protocol.send_request_async(
            "mplp/psg/createContext", {"context": context}
        )
        assert answer.ok is True
        missing = await session.client.protocol.send_request_async(
            "mplp/psg/getPlan", {"plan_id": new_id()}
        )
        assert (missing.ok, missing.errors[0].code) == (False, "not_found")
        plan = plan_doc(context["context_id"])
        created = await session.client.protocol.send_request_async(
            "mplp/psg/createPlan", {"plan": plan}
        )
        assert created.ok is True
        refused = await session.client.protocol.send_request_async(
            "mplp/psg/setPlanStatus", {"plan_id": plan["plan_id"], "status": "in_progress"}
        )
        assert (refused.ok, refused.errors[0].code) == (False, "transition_forbidden")
        api = await wait_for_api(state_dir, workspace)
        token = Path(api["token_file"]).read_text()
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
            http.get(f"{api['url']}/psg/plans/{plan['plan_id']}") as response,
        ):
            assert response.status == 200
            assert (await response.json())["status"] == "draft"


@pytest.mark.parametrize("flag", ["--no-api"])
async def test_the_api_can_be_switched_off(tmp_path: Path, flag: str) -> None:
    workspace, state_dir = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    daemon = await start_watch(workspace, state_dir, flag)
    try:
        assert daemon.stderr is not None
        line = await asyncio.wait_for(daemon.stderr.readline(), 30)  # "watching ..." once ready
        assert b"watching" in line
        assert not (state_dir / "api.json").exists()
    finally:
        await stop(daemon)

"""Contract tests of the loopback HTTP API, over real HTTP against a real workspace."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mplp_lsp.api.app import ROUTES, build_app, openapi_document
from mplp_lsp.api.endpoint import read_endpoint
from mplp_lsp.api.services import ApiServices
from mplp_lsp.protocol.envelope import new_id
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from tests.conftest import sample
from tests.support.http_api import Api, started_api
from tests.support.http_api import api as api  # the fixture
from tests.support.plans import META, context_doc, plan_doc


async def test_the_whole_plan_lifecycle_over_http(api: Api) -> None:
    context = context_doc()
    assert (await api.call("POST", "/psg/contexts", context))[0] == 201
    status, got = await api.call("GET", f"/psg/contexts/{context['context_id']}")
    assert (status, got) == (200, context)

    plan = plan_doc(context["context_id"])
    plan_id = plan["plan_id"]
    first, second = (step["step_id"] for step in plan["steps"])
    status, created = await api.call("POST", "/psg/plans", plan)
    assert status == 201 and created == plan

    changes = [
        (f"/psg/plans/{plan_id}/status", "proposed"),
        (f"/psg/plans/{plan_id}/status", "approved"),
        (f"/psg/plans/{plan_id}/status", "in_progress"),
        (f"/psg/plans/{plan_id}/steps/{first}/status", "in_progress"),
        (f"/psg/plans/{plan_id}/steps/{first}/status", "completed"),
        (f"/psg/plans/{plan_id}/steps/{second}/status", "in_progress"),
        (f"/psg/plans/{plan_id}/steps/{second}/status", "completed"),
        (f"/psg/plans/{plan_id}/status", "completed"),
    ]
    for path, new in changes:
        status, body = await api.call("PATCH", path, {"status": new})
        assert status == 200, body
    status, final = await api.call("GET", f"/psg/plans/{plan_id}")
    assert final["status"] == "completed"
    assert [step["status"] for step in final["steps"]] == ["completed", "completed"]

    stages = await api.events("pipeline_stage")
    assert len(stages) == len(changes)  # exactly one per status change
    assert [(e["stage_id"], e["payload"]["to"]) for e in stages] == [
        (path.split("/")[-2] if "/steps/" in path else plan_id, new) for path, new in changes
    ]
    assert all(e["pipeline_id"] == plan_id for e in stages)
    updates = await api.events("graph_update")
    assert [e["event_type"] for e in updates] == ["context_created", "plan_created"]
    assert updates[0]["update_kind"] == "node_add" and updates[0]["node_delta"] == 1
    # plan + 2 steps; plan→context, 2×step→plan, 1 dependency
    assert (updates[1]["update_kind"], updates[1]["node_delta"], updates[1]["edge_delta"]) == (
        "bulk",
        3,
        4,
    )
    for event in stages + updates:
        assert validate(Kind(event["event_family"]), event).ok


async def _started_plan(api: Api) -> tuple[str, list[str]]:
    context = context_doc()
    await api.call("POST", "/psg/contexts", context)
    plan = plan_doc(context["context_id"])
    await api.call("POST", "/psg/plans", plan)
    return plan["plan_id"], [step["step_id"] for step in plan["steps"]]


async def test_draft_to_in_progress_is_refused_and_changes_nothing(api: Api) -> None:
    plan_id, _ = await _started_plan(api)
    before = await api.dump()
    stages_before = await api.events("pipeline_stage")
    status, body = await api.call(
        "PATCH", f"/psg/plans/{plan_id}/status", {"status": "in_progress"}
    )
    assert status == 409
    assert body["ok"] is False
    [error] = body["errors"]
    assert error["code"] == "transition_forbidden"
    assert "draft" in error["message"] and "in_progress" in error["message"]
    assert await api.dump() == before
    assert await api.events("pipeline_stage") == stages_before


async def test_a_step_waits_for_its_dependencies_and_its_plan(api: Api) -> None:
    plan_id, (first, second) = await _started_plan(api)
    path = f"/psg/plans/{plan_id}/steps/{first}/status"
    status, body = await api.call("PATCH", path, {"status": "in_progress"})
    assert (status, body["errors"][0]["code"]) == (409, "transition_precondition")  # plan draft
    for new in ("proposed", "approved", "in_progress"):
        await api.call("PATCH", f"/psg/plans/{plan_id}/status", {"status": new})
    status, body = await api.call(
        "PATCH", f"/psg/plans/{plan_id}/steps/{second}/status", {"status": "in_progress"}
    )
    assert status == 409 and first in body["errors"][0]["message"]
    status, body = await api.call("PATCH", f"/psg/plans/{plan_id}/status", {"status": "completed"})
    assert (status, body["errors"][0]["code"]) == (409, "transition_precondition")


async def test_a_cyclic_plan_is_refused_naming_the_cycle(api: Api) -> None:
    context = context_doc()
    await api.call("POST", "/psg/contexts", context)
    a, b, c = new_id(), new_id(), new_id()
    steps = [
        {"step_id": a, "description": "a", "status": "pending", "dependencies": [c]},
        {"step_id": b, "description": "b", "status": "pending", "dependencies": [a]},
        {"step_id": c, "description": "c", "status": "pending", "dependencies": [b]},
    ]
    before = await api.dump()
    status, body = await api.call("POST", "/psg/plans", plan_doc(context["context_id"], steps))
    assert status == 422
    [error] = body["errors"]
    assert error["code"] == "dependency_cycle"
    assert all(step in error["message"] for step in (a, b, c))
    assert await api.dump() == before


async def test_a_dependency_outside_the_plan_is_refused(api: Api) -> None:
    context = context_doc()
    await api.call("POST", "/psg/contexts", context)
    steps = [
        {"step_id": new_id(), "description": "a", "status": "pending", "dependencies": [new_id()]}
    ]
    status, body = await api.call("POST", "/psg/plans", plan_doc(context["context_id"], steps))
    assert (status, body["errors"][0]["code"]) == (422, "dependency_outside_plan")
    assert body["errors"][0]["path"] == "steps[0].dependencies[0]"


async def test_a_plan_for_a_missing_context_is_refused(api: Api) -> None:
    before = await api.dump()
    status, body = await api.call("POST", "/psg/plans", plan_doc(new_id()))
    assert status == 422
    assert body["errors"] == [
        {
            "path": "context_id",
            "code": "reference_unresolved",
            "message": body["errors"][0]["message"],
        }
    ]
    assert await api.dump() == before


async def test_invalid_uuids_are_refused(api: Api) -> None:
    context = context_doc("550E8400-E29B-41D4-A716-446655440000")  # upper case
    status, body = await api.call("POST", "/psg/contexts", context)
    assert (status, body["errors"][0]["path"], body["errors"][0]["code"]) == (
        422,
        "context_id",
        "pattern",
    )
    v1 = "c232ab00-9414-11ec-b3c8-9f6bdeced846"
    status, body = await api.call("POST", "/psg/contexts", context_doc(v1))
    assert status == 422
    status, body = await api.call("GET", "/psg/plans/not-a-uuid")
    assert (status, body["errors"][0]["code"]) == (422, "pattern")
    status, body = await api.call("GET", f"/psg/plans/{new_id()}")
    assert (status, body["errors"][0]["code"]) == (404, "not_found")


async def test_trace_segments_append_but_never_change(api: Api) -> None:
    context = context_doc()
    await api.call("POST", "/psg/contexts", context)
    trace_id, first = new_id(), new_id()
    trace = {
        "meta": META,
        "trace_id": trace_id,
        "context_id": context["context_id"],
        "root_span": {"trace_id": trace_id, "span_id": new_id()},
        "status": "running",
        "segments": [{"segment_id": first, "label": "parse", "status": "completed"}],
    }
    assert (await api.call("POST", "/psg/traces", trace))[0] == 201
    second = {
        "segment_id": new_id(),
        "parent_segment_id": first,
        "label": "check",
        "status": "running",
    }
    status, stored = await api.call(
        "POST", f"/psg/traces/{trace_id}/segments", {"segments": [second]}
    )
    assert status == 201
    assert [s["segment_id"] for s in stored["segments"]] == [first, second["segment_id"]]

    before = await api.dump()
    edited = {"segment_id": first, "label": "parse", "status": "failed"}
    for method in ("PATCH", "PUT", "DELETE"):
        status, body = await api.call(method, f"/psg/traces/{trace_id}/segments/{first}", edited)
        assert (status, body["errors"][0]["code"]) == (409, "trace_segment_immutable")
    # Appending a segment with a stored id is an edit in disguise.
    status, body = await api.call(
        "POST", f"/psg/traces/{trace_id}/segments", {"segments": [edited]}
    )
    assert (status, body["errors"][0]["code"]) == (409, "duplicate_id")
    assert await api.dump() == before
    assert await api.events("graph_update") != []
    # The store refuses it too, whatever the code above does.
    with pytest.raises(Exception, match="append-only"):
        await api.workspace.writer.run(
            lambda conn: conn.execute("UPDATE psg_trace_segments SET body = '{}'")
        )


async def test_a_stale_status_change_never_moves_back(api: Api) -> None:
    plan_id, _ = await _started_plan(api)
    await api.call(
        "PATCH",
        f"/psg/plans/{plan_id}/status",
        {"status": "proposed", "timestamp": "2030-01-01T00:00:00Z"},
    )
    status, body = await api.call(
        "PATCH",
        f"/psg/plans/{plan_id}/status",
        {"status": "draft", "timestamp": "2029-01-01T00:00:00Z"},
    )
    assert (status, body["errors"][0]["code"]) == (409, "stale_change")


async def test_integration_events_go_through_the_intake(api: Api) -> None:
    status, body = await api.call("POST", "/integration/git", sample("git"))
    assert status == 202 and body["outcome"] == "accepted"
    status, body = await api.call("POST", "/integration/git", sample("git"))
    assert (status, body["outcome"]) == (200, "duplicate")
    bad = sample("tool") | {"tool_kind": "hammer"}
    status, body = await api.call("POST", "/integration/tool", bad)
    assert (status, body["errors"][0]["code"]) == (422, "enum")
    outside = sample("file_update") | {"file_path": "/etc/passwd"}
    status, body = await api.call("POST", "/integration/file", outside)
    assert status == 422 and body["errors"][0]["code"].startswith("path_")
    status, body = await api.call("POST", "/integration/nope", {})
    assert status == 404


async def test_a_ci_event_moves_the_pipeline_and_emits_a_correlated_stage(api: Api) -> None:
    running = sample("ci")
    status, accepted = await api.call("POST", "/integration/ci", running)
    assert status == 202
    done = running | {"status": "succeeded", "completed_at": "2026-03-02T08:09:00Z"}
    status, finished = await api.call("POST", "/integration/ci", done)
    assert status == 202
    late = running | {"status": "pending", "started_at": "2026-03-02T08:00:00Z"}
    assert (await api.call("POST", "/integration/ci", late))[0] == 202
    await api.workspace.bus.drain()
    stages = await api.events("pipeline_stage")
    assert [(e["stage_status"], e["payload"]["cause_event_id"]) for e in stages] == [
        ("running", accepted["event_id"]),
        ("completed", finished["event_id"]),
    ]
    rows = await api.workspace.writer.read(
        lambda conn: conn.execute("SELECT status FROM psg_pipelines").fetchall()
    )
    assert rows == [("succeeded",)]  # the late pending event did not move it back


async def test_events_paginate_with_after_and_limit(api: Api) -> None:
    for index in range(3):
        await api.call("POST", "/psg/contexts", context_doc())
        del index
    status, page = await api.call("GET", "/events?limit=2")
    assert status == 200 and len(page["events"]) == 2
    status, rest = await api.call("GET", f"/events?after={page['next_after']}")
    assert [e["seq"] for e in rest["events"]] == [page["next_after"] + 1]
    assert (await api.call("GET", "/events?limit=x"))[0] == 422
    assert (await api.call("GET", "/events?kind=bogus"))[0] == 422
    assert (await api.call("GET", "/events?since=yesterday"))[0] == 422


# --- security -------------------------------------------------------------------------------


async def test_requests_without_the_right_token_are_refused(api: Api) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": api.server.token}):
        async with api.session.get(api.server.url + "/health", headers=headers) as response:
            assert response.status == 401
            body = await response.json()
            assert body["errors"][0]["code"] == "unauthorized"
    # Refused before routing: an unknown path tells an outsider nothing either.
    async with api.session.get(api.server.url + "/nothing-here") as response:
        assert response.status == 401


async def test_a_foreign_host_header_is_refused(api: Api) -> None:
    for host in ("evil.example", f"evil.example:{api.server.port}", "127.0.0.1.nip.io"):
        status, body = await api.call("GET", "/health", headers={"Host": host})
        assert (status, body["errors"][0]["code"]) == (403, "forbidden_host")
    for host in (f"localhost:{api.server.port}", f"127.0.0.1:{api.server.port}"):
        assert (await api.call("GET", "/health", headers={"Host": host}))[0] == 200


async def test_a_10_mb_body_is_refused_without_reading_it(api: Api) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
    head = (
        "POST /psg/plans HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{api.server.port}\r\n"
        f"Authorization: Bearer {api.server.token}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {10 * 2**20}\r\n\r\n"
    )
    writer.write(head.encode())
    writer.write(b"[" * 65536)  # a little of the body; the rest is never sent
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 10)
    assert b" 413 " in status_line
    writer.close()


async def test_a_chunked_body_over_the_limit_is_cut_off(api: Api) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b" " * 2**20

    async with api.session.post(
        api.server.url + "/psg/plans",
        data=chunks(),
        headers={**api.headers, "Content-Type": "application/json"},
    ) as response:
        assert response.status == 413


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing interface
            address = str(probe.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


async def test_a_non_loopback_peer_is_refused(api: Api) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    # The daemon never binds here; the test does, to prove the guard refuses such a peer.
    from aiohttp import web

    port = api.server.port
    app = build_app(
        ApiServices.of(api.workspace),
        api.server.token,
        lambda: {f"127.0.0.1:{port}", f"{address}"},
    )
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, address, 0)
    await site.start()
    try:
        foreign_port = runner.addresses[0][1]
        async with api.session.get(
            f"http://{address}:{foreign_port}/health",
            headers={**api.headers, "Host": f"127.0.0.1:{port}"},
        ) as response:
            assert response.status == 403
            assert (await response.json())["errors"][0]["code"] == "forbidden_peer"
    finally:
        await runner.cleanup()


def test_the_listener_binds_loopback_and_the_token_is_private(api: Api) -> None:
    assert api.server.url.startswith("http://127.0.0.1:")
    mode = stat.S_IMODE(os.stat(api.server.token_file).st_mode)
    assert mode == 0o600
    assert api.server.token_file.read_text() == api.server.token
    endpoint = read_endpoint(api.workspace.paths)
    assert endpoint is not None and endpoint.url == api.server.url


async def test_stopping_removes_the_endpoint_and_token_files(tmp_path: Path) -> None:
    server, workspace = await started_api(tmp_path)
    await server.stop()
    await workspace.close()
    assert read_endpoint(workspace.paths) is None
    assert not server.token_file.exists()


def test_every_route_is_in_the_openapi_document() -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    documented = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item
    }
    assert {(method, path) for method, path, _ in ROUTES} <= documented
    # Every route the application serves, the dashboard's included (HEAD comes with GET).
    app = build_app(ApiServices(None, None, None, None, None), "t", lambda: ())  # type: ignore[arg-type]
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    assert served == documented
    json.dumps(document)

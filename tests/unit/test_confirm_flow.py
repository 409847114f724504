"""A plan approved through its Confirm, as upstream golden FLOW-05: rejected, revised, approved.

Over the real loopback API (aiohttp on 127.0.0.1) against a real store.
"""

from __future__ import annotations

from typing import Any

from mplp_lsp.protocol.envelope import new_id
from tests.support.http_api import Api, api
from tests.support.plans import confirm_doc, context_doc, plan_doc, run

__all__ = ["api"]  # the fixture


async def proposed_plan_with_confirm(api: Api) -> tuple[dict[str, Any], dict[str, Any]]:
    context = context_doc()
    plan = plan_doc(context["context_id"])
    assert (await api.call("POST", "/psg/contexts", context))[0] == 201
    assert (await api.call("POST", "/psg/plans", plan))[0] == 201
    path = f"/psg/plans/{plan['plan_id']}/status"
    assert (await api.call("PATCH", path, {"status": "proposed"}))[0] == 200
    confirm = confirm_doc(plan["plan_id"])
    assert (await api.call("POST", "/psg/confirms", confirm))[0] == 201
    return plan, confirm


async def test_golden_flow_05_a_rejected_plan_is_revised_and_approved_then_runs(api: Api) -> None:
    plan, confirm = await proposed_plan_with_confirm(api)
    plan_id, confirm_id = plan["plan_id"], confirm["confirm_id"]
    decide = f"/psg/confirms/{confirm_id}/decisions"
    plan_path = f"/psg/plans/{plan_id}"

    # Nothing approves the plan past its Confirm, and it does not run before.
    status, body = await api.call("PATCH", plan_path + "/status", {"status": "approved"})
    assert (status, body["errors"][0]["code"]) == (409, "transition_precondition")
    assert confirm_id in body["errors"][0]["message"]
    status, lines = await run(api, plan_id, {})
    assert (status, lines[0]["errors"][0]["code"]) == (409, "transition_precondition")
    assert (await api.call("GET", plan_path))[1]["status"] == "proposed"

    # Round 1: the reviewer rejects, with a reason; the plan goes back to draft.
    status, body = await api.call("POST", decide, {"status": "rejected", "decided_by_role": "dba"})
    assert (status, body["errors"][0]["code"]) == (422, "required")
    rejection = {
        "status": "rejected",
        "decided_by_role": "dba_reviewer",
        "reason": "Back up the table before dropping the column",
    }
    status, decided = await api.call("POST", decide, rejection)
    assert status == 201, decided
    assert decided["status"] == "rejected"
    assert (await api.call("GET", plan_path))[1]["status"] == "draft"

    # Revised and proposed again; round 2 approves it.
    assert (await api.call("PATCH", plan_path + "/status", {"status": "proposed"}))[0] == 200
    approval = {"status": "approved", "decided_by_role": "dba_reviewer", "reason": "Backed up"}
    status, decided = await api.call("POST", decide, approval)
    assert status == 201, decided
    assert decided["status"] == "approved"
    assert [(d["status"], d["decided_by_role"]) for d in decided["decisions"]] == [
        ("rejected", "dba_reviewer"),
        ("approved", "dba_reviewer"),
    ]
    assert (await api.call("GET", f"/psg/confirms/{confirm_id}"))[1] == decided
    assert (await api.call("GET", plan_path))[1]["status"] == "approved"
    status, body = await api.call("POST", decide, rejection)
    assert (status, body["errors"][0]["code"]) == (409, "transition_from_terminal")

    # Each decision is an event like any other status change, and so are the plan's moves.
    updates = [e for e in await api.events("graph_update") if e["event_type"] == "confirm_decided"]
    assert [(e["payload"]["from"], e["payload"]["to"]) for e in updates] == [
        ("pending", "rejected"),
        ("rejected", "approved"),
    ]
    moves = [
        (e["payload"]["from"], e["payload"]["to"], e["payload"].get("confirm_id"))
        for e in await api.events("pipeline_stage")
        if e["event_type"] == "plan_status_changed"
    ]
    assert moves == [
        ("draft", "proposed", None),
        ("proposed", "draft", confirm_id),
        ("draft", "proposed", None),
        ("proposed", "approved", confirm_id),
    ]

    status, lines = await run(api, plan_id, {})
    assert status == 200
    assert lines[-1]["result"]["execution"]["plan_status"] == "completed"


async def test_a_confirm_starts_pending_and_decides_only_on_a_proposed_plan(api: Api) -> None:
    plan, confirm = await proposed_plan_with_confirm(api)
    early = confirm_doc(plan["plan_id"]) | {"status": "approved"}
    status, body = await api.call("POST", "/psg/confirms", early)
    assert (status, body["errors"][0]["code"]) == (422, "initial_status")
    decide = f"/psg/confirms/{confirm['confirm_id']}/decisions"
    await api.call("PATCH", f"/psg/plans/{plan['plan_id']}/status", {"status": "draft"})
    status, body = await api.call(
        "POST", decide, {"status": "approved", "decided_by_role": "dba_reviewer"}
    )
    assert (status, body["errors"][0]["code"]) == (409, "transition_precondition")
    before = await api.dump()
    status, body = await api.call("POST", decide, {"status": "maybe", "decided_by_role": "x"})
    assert (status, body["errors"][0]["code"]) == (422, "enum")
    assert await api.dump() == before  # refused decisions change nothing
    status, cancelled = await api.call(
        "POST", decide, {"status": "cancelled", "decided_by_role": "migration_agent"}
    )
    assert (status, cancelled["status"]) == (201, "cancelled")
    # A cancelled Confirm holds nothing back: the plan is approved the ordinary way.
    for move in ("proposed", "approved"):
        path = f"/psg/plans/{plan['plan_id']}/status"
        assert (await api.call("PATCH", path, {"status": move}))[0] == 200
    status, body = await api.call("POST", f"/psg/confirms/{new_id()}/decisions", {})
    assert (status, body["errors"][0]["code"]) == (404, "not_found")


async def test_a_run_waits_for_the_confirm_without_proposing_the_plan(api: Api) -> None:
    context = context_doc()
    plan = plan_doc(context["context_id"])
    status, lines = await run(api, plan["plan_id"], {"plan": plan, "context": context})
    assert status == 200  # no Confirm: approved the ordinary way, and run
    assert lines[-1]["result"]["success"] is True
    second = plan_doc(context["context_id"])
    assert (await api.call("POST", "/psg/plans", second))[0] == 201
    confirm = confirm_doc(second["plan_id"])
    assert (await api.call("POST", "/psg/confirms", confirm))[0] == 201
    before = await api.dump()
    status, lines = await run(api, second["plan_id"], {})
    assert (status, lines[0]["errors"][0]["code"]) == (409, "transition_precondition")
    assert confirm["confirm_id"] in lines[0]["errors"][0]["message"]
    assert await api.dump() == before  # still draft: a run proposes nothing it cannot start

"""``mplp/plan/run`` and ``mplp/psg/decideConfirm`` in a real ``mplp-lsp serve`` session."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from tests.e2e.harness import lsp_session
from tests.support.plans import confirm_doc, context_doc, plan_doc


async def test_a_plan_approved_through_its_confirm_runs_in_the_server(tmp_path: Path) -> None:
    workspace, state_dir = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    async with lsp_session(workspace, state_dir) as session:
        protocol = session.client.protocol
        context = context_doc()
        plan = plan_doc(context["context_id"])
        plan_id = plan["plan_id"]
        for method, params in (
            ("mplp/psg/createContext", {"context": context}),
            ("mplp/psg/createPlan", {"plan": plan}),
            ("mplp/psg/setPlanStatus", {"plan_id": plan_id, "status": "proposed"}),
        ):
            assert (await protocol.send_request_async(method, params)).ok is True
        confirm = confirm_doc(plan_id)
        created = await protocol.send_request_async("mplp/psg/createConfirm", {"confirm": confirm})
        assert created.ok is True
        early = await protocol.send_request_async("mplp/plan/run", {"plan_id": plan_id})
        assert (early.ok, early.errors[0].code) == (False, "transition_precondition")
        decided = await protocol.send_request_async(
            "mplp/psg/decideConfirm",
            {
                "confirm_id": confirm["confirm_id"],
                "decision": {"status": "approved", "decided_by_role": "reviewer"},
            },
        )
        assert decided.ok is True and decided.result.status == "approved"
        token = "plan-run-1"
        session.client.progress_reports[token] = []
        done = await protocol.send_request_async(
            "mplp/plan/run", {"plan_id": plan_id, "workDoneToken": token}
        )
        assert done.ok is True, done
        assert done.result.success is True and done.result.execution.plan_status == "completed"
        # pytest-lsp annotates these as ProgressParams; it stores the structured values.
        reports: list[object] = list(session.client.progress_reports[token])
        assert isinstance(reports[0], types.WorkDoneProgressBegin)
        assert isinstance(reports[-1], types.WorkDoneProgressEnd)
        assert reports[-1].message == "completed"
        middle = [r for r in reports if isinstance(r, types.WorkDoneProgressReport)]
        assert middle and middle[-1].message is not None
        assert middle[-1].message.startswith(f"{done.result.events} events")
        again = await protocol.send_request_async("mplp/plan/run", {"plan_id": plan_id})
        assert (again.ok, again.errors[0].code) == (False, "transition_from_terminal")

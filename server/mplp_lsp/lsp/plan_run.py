"""``mplp/plan/run``: run a plan in the server, which owns the workspace's store.

Params: ``{plan_id, plan?, context?, actions?, executor?, workspace?, workDoneToken?}`` (the
body of ``POST /psg/plans/{plan_id}/run`` plus the workspace folder and the LSP progress
token). The answer is ``{"ok": true, "result": {success, execution, error}}`` or a
ValidationResult with the same codes as the HTTP API. With a ``workDoneToken`` the client
sees the run's progress as ``$/progress`` reports, one per stored event batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mplp_lsp.lsp.feature import Feature, handles, json_params
from mplp_lsp.lsp.server import MplpLanguageServer

if TYPE_CHECKING:
    from mplp_lsp.plans.runs import PlanRunResult

METHOD = "mplp/plan/run"
_CALL_FIELDS = frozenset({"plan_id", "workspace", "workDoneToken"})


class PlanRunFeature(Feature[MplpLanguageServer]):
    @handles(METHOD)
    async def run_plan(self, params: Any) -> dict[str, Any]:
        await self.server.ready.wait()
        return await run(self.server, json_params(params))


async def run(ls: MplpLanguageServer, params: Any) -> dict[str, Any]:
    # Imported at the first run, as the engine is: the error codes' enum is not needed to
    # answer initialize.
    from mplp_lsp.plans.runs import PlanRunResult, parse_request
    from mplp_lsp.protocol.result import ErrorCode, ValidationResult

    if not isinstance(params, dict):
        return ValidationResult.single("", ErrorCode.TYPE, "params must be an object").to_dict()
    plan_id = params.get("plan_id")
    if not isinstance(plan_id, str):
        return ValidationResult.single(
            "plan_id", ErrorCode.REQUIRED, "plan_id (a string) is required"
        ).to_dict()
    workspace = ls.workspace_for(params.get("workspace"))
    if workspace is None:
        return ValidationResult.single(
            "workspace", ErrorCode.NOT_FOUND, "no such workspace folder"
        ).to_dict()
    request = parse_request({k: v for k, v in params.items() if k not in _CALL_FIELDS}, plan_id)
    if isinstance(request, ValidationResult):
        return request.to_dict()
    token = params.get("workDoneToken")
    progress = _Progress(ls, token, plan_id) if isinstance(token, str | int) else None
    stored = 0
    async for item in workspace.owner.plans.stream(request, plan_id):
        if isinstance(item, PlanRunResult):
            if progress is not None:
                progress.end(item)
            if item.summary is None:
                assert item.refused is not None
                return item.refused.to_dict()
            return {"ok": True, "result": {**item.summary, "events": stored}}
        stored += len(item)
        if progress is not None:
            last = item[-1]
            progress.report(f"{stored} events; {last.kind} {last.envelope.get('event_type', '')}")
    raise AssertionError("a plan run's stream ends with its result")


class _Progress:
    """Work-done progress on the token the client sent with the request."""

    def __init__(self, ls: MplpLanguageServer, token: str | int, plan_id: str) -> None:
        self._progress, self._token = ls.work_done_progress, token
        self._progress.begin(token, types.WorkDoneProgressBegin(title=f"mplp: plan {plan_id}"))

    def report(self, message: str) -> None:
        self._progress.report(self._token, types.WorkDoneProgressReport(message=message))

    def end(self, result: PlanRunResult) -> None:
        ending = "refused" if result.summary is None else _plan_status(result.summary)
        self._progress.end(self._token, types.WorkDoneProgressEnd(message=ending))
        self._progress.tokens.pop(self._token, None)


def _plan_status(summary: dict[str, Any]) -> str:
    return str(summary.get("execution", {}).get("plan_status", "ended"))

"""The PSG operations as named requests (the LSP's ``mplp/psg/...`` methods call these).

Every request takes a JSON object and answers with ``{"ok": true, "result": ...}`` or a
ValidationResult (``{"ok": false, "errors": [...]}``) with the same codes as the HTTP API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the store owner loads after the editor is served; the method names before
    from mplp_lsp.graph.changes import WriteResult
    from mplp_lsp.graph.service import PsgService

PREFIX = "mplp/psg/"

_Answer = Awaitable["WriteResult | dict[str, Any] | None"]
_Call = Callable[["PsgService", Mapping[str, Any]], _Answer]

_REQUESTS: dict[str, tuple[tuple[str, ...], _Call]] = {
    "createContext": (("context",), lambda s, p: s.create_context(p["context"])),
    "getContext": (("context_id",), lambda s, p: s.get_context(p["context_id"])),
    "createPlan": (("plan",), lambda s, p: s.create_plan(p["plan"])),
    "getPlan": (("plan_id",), lambda s, p: s.get_plan(p["plan_id"])),
    "setPlanStatus": (
        ("plan_id", "status"),
        lambda s, p: s.set_plan_status(p["plan_id"], p["status"], p.get("timestamp")),
    ),
    "setStepStatus": (
        ("plan_id", "step_id", "status"),
        lambda s, p: s.set_step_status(p["plan_id"], p["step_id"], p["status"], p.get("timestamp")),
    ),
    "createConfirm": (("confirm",), lambda s, p: s.create_confirm(p["confirm"])),
    "getConfirm": (("confirm_id",), lambda s, p: s.get_confirm(p["confirm_id"])),
    "decideConfirm": (
        ("confirm_id", "decision"),
        lambda s, p: s.decide_confirm(p["confirm_id"], p["decision"]),
    ),
    "createTrace": (("trace",), lambda s, p: s.create_trace(p["trace"])),
    "getTrace": (("trace_id",), lambda s, p: s.get_trace(p["trace_id"])),
    "appendTraceSegments": (
        ("trace_id", "segments"),
        lambda s, p: s.append_segments(p["trace_id"], p["segments"]),
    ),
}
METHODS: tuple[str, ...] = tuple(PREFIX + name for name in _REQUESTS)


async def handle(service: PsgService, method: str, params: Any) -> dict[str, Any]:
    from mplp_lsp.graph.changes import WriteResult
    from mplp_lsp.graph.integrity import Rejected
    from mplp_lsp.protocol.result import ErrorCode, ValidationResult

    required, call = _REQUESTS[method.removeprefix(PREFIX)]
    if not isinstance(params, Mapping):
        return ValidationResult.single("", ErrorCode.TYPE, "params must be an object").to_dict()
    for name in required:
        if name not in params:
            return ValidationResult.single(
                name, ErrorCode.REQUIRED, f"{name} is required"
            ).to_dict()
        if name.endswith("_id") and not isinstance(params[name], str):
            return ValidationResult.single(
                name, ErrorCode.TYPE, f"{name} must be a string"
            ).to_dict()
    try:
        answer = await call(service, params)
    except Rejected as rejected:
        return rejected.result.to_dict()
    if answer is None:
        missing = required[0]
        return ValidationResult.single(
            missing, ErrorCode.NOT_FOUND, f"no {missing.split('_')[0]} {params[missing]}"
        ).to_dict()
    value = answer.value if isinstance(answer, WriteResult) else answer
    return {"ok": True, "result": value}

"""The L2 lifecycles (Plan, Step, Trace, Confirm) as data, and the check every status change passes.

The tables are the project's adopted policy (MPLP v1.0 ships no binding transition file; see
``docs/runtime.md``). A move that is not in a table is refused with ``transition_forbidden``;
a move out of a final state with ``transition_from_terminal``; a move of the table whose
condition does not hold with ``transition_precondition``. Every message names the object,
the from and to states and why.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final, Literal

from mplp_lsp.protocol.result import ErrorCode, ValidationResult

ObjectType = Literal["plan", "step", "trace", "confirm"]
StageStatus = Literal["pending", "running", "completed", "failed", "skipped"]

PLAN_STATES: Final = (
    "draft",
    "proposed",
    "approved",
    "in_progress",
    "completed",
    "failed",
    "cancelled",
)
STEP_STATES: Final = ("pending", "in_progress", "completed", "blocked", "skipped", "failed")

PLAN_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    "draft": frozenset({"proposed", "cancelled"}),
    "proposed": frozenset({"approved", "draft"}),
    "approved": frozenset({"in_progress"}),
    "in_progress": frozenset({"completed", "failed", "cancelled"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
STEP_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    "pending": frozenset({"in_progress", "blocked", "skipped"}),
    "in_progress": frozenset({"completed", "failed"}),
    "blocked": frozenset({"pending"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "skipped": frozenset(),
}
# Trace (the upstream trace diagram): recording starts, then ends one way.
TRACE_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    "pending": frozenset({"running", "cancelled"}),
    "running": frozenset({"completed", "failed", "cancelled"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
# Confirm (upstream golden FLOW-05): a decision at a time, appended to decisions[]. A rejection
# is not final: the plan goes back to draft, is revised and proposed again, and the same
# Confirm is decided again. Approval and cancellation end it.
CONFIRM_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    "pending": frozenset({"approved", "rejected", "cancelled"}),
    "rejected": frozenset({"approved", "rejected", "cancelled"}),
    "approved": frozenset(),
    "cancelled": frozenset(),
}
CONFIRM_AWAITING: Final = frozenset({"pending", "rejected"})  # states that hold the target back
INITIAL: Final[Mapping[ObjectType, str]] = {
    "plan": "draft",
    "step": "pending",
    "confirm": "pending",
}
STEP_DONE: Final = frozenset({"completed", "skipped"})  # what lets a plan complete

# pipeline_stage has five stage words; a plan's or step's status maps onto one of them.
# pipeline_stage has no "cancelled": a cancelled plan is a failed stage (the event says why).
PLAN_STAGE: Final[Mapping[str, StageStatus]] = {
    "draft": "pending",
    "proposed": "pending",
    "approved": "pending",
    "in_progress": "running",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "failed",
}
STEP_STAGE: Final[Mapping[str, StageStatus]] = {
    "pending": "pending",
    "blocked": "pending",
    "in_progress": "running",
    "completed": "completed",
    "failed": "failed",
    "skipped": "skipped",
}

_TABLES: Final[Mapping[ObjectType, Mapping[str, frozenset[str]]]] = {
    "plan": PLAN_TRANSITIONS,
    "step": STEP_TRANSITIONS,
    "trace": TRACE_TRANSITIONS,
    "confirm": CONFIRM_TRANSITIONS,
}


def _refuse(code: ErrorCode, kind: ObjectType, old: str, new: str, why: str) -> ValidationResult:
    return ValidationResult.single("status", code, f"{kind} {old} → {new}: {why}")


def check_table(kind: ObjectType, old: str, new: str) -> ValidationResult:
    """Whether ``old → new`` is a move of ``kind``'s table (no conditions)."""
    table = _TABLES[kind]
    if new not in table:
        return _refuse(ErrorCode.ENUM, kind, old, new, f"{new!r} is not a {kind} status")
    allowed = table.get(old)
    if allowed is None:
        return _refuse(ErrorCode.ENUM, kind, old, new, f"{old!r} is not a {kind} status")
    if new in allowed:
        return ValidationResult.success()
    if not allowed:
        return _refuse(ErrorCode.TRANSITION_FROM_TERMINAL, kind, old, new, f"{old} is final")
    if old == new:
        return _refuse(
            ErrorCode.TRANSITION_FORBIDDEN, kind, old, new, f"the {kind} is already {old}"
        )
    why = f"not an allowed move; from {old} a {kind} may go to {', '.join(sorted(allowed))}"
    if (kind, old, new) == ("plan", "draft", "in_progress"):
        why = "a plan must be proposed and approved before it starts; " + why
    return _refuse(ErrorCode.TRANSITION_FORBIDDEN, kind, old, new, why)


def check_plan(old: str, new: str, step_states: Collection[str]) -> ValidationResult:
    """A plan status change; ``step_states`` are its steps' current states."""
    result = check_table("plan", old, new)
    if result.ok and new == "completed":
        open_steps = sorted({state for state in step_states if state not in STEP_DONE})
        if open_steps:
            why = f"every step must be completed or skipped; some are {', '.join(open_steps)}"
            return _refuse(ErrorCode.TRANSITION_PRECONDITION, "plan", old, new, why)
    return result


def check_step(
    old: str, new: str, *, plan_status: str, dependency_states: Mapping[str, str]
) -> ValidationResult:
    """A step status change; ``dependency_states`` maps each dependency's id to its state."""
    result = check_table("step", old, new)
    if not result.ok:
        return result
    if plan_status != "in_progress":
        why = f"steps change only while their plan is in_progress; the plan is {plan_status}"
        return _refuse(ErrorCode.TRANSITION_PRECONDITION, "step", old, new, why)
    if new == "in_progress":
        waiting = sorted(dep for dep, state in dependency_states.items() if state != "completed")
        if waiting:
            why = f"dependencies not completed: {', '.join(waiting)}"
            return _refuse(ErrorCode.TRANSITION_PRECONDITION, "step", old, new, why)
    if new == "blocked":
        failed = [dep for dep, state in dependency_states.items() if state == "failed"]
        if not failed:
            why = "a step is blocked only when one of its dependencies failed"
            return _refuse(ErrorCode.TRANSITION_PRECONDITION, "step", old, new, why)
    return ValidationResult.success()

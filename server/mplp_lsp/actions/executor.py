"""The action execution layer: ``async execute(action) -> result``; failures raise.

Every execution is framed by two ``runtime_execution`` events (``running``, then
``completed``, ``failed`` or ``cancelled``) with one ``execution_id``. Handlers add their own
evidence (``tool_event``s, ``file_update``s). Nothing is stored here: the events travel with
the result (or the :class:`ActionError`) and the runtime flushes them through the intake once
per tick, so they are validated and stored like every other event.

A failure is always an :class:`ActionError` carrying a ValidationResult with a stable code
(``tool_failed``, ``action_timeout``, ``http_error``, ... or ``action_failed`` for anything a
handler did not expect), so the runtime can log and record it without guessing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mplp_lsp.actions.kinds import EXECUTOR_KINDS, Action, parse_action
from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.sanitize.redact import redact

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event produced during a tick, not yet handed to the intake."""

    kind: Kind
    data: dict[str, Any]
    source_module: str = "ael"


@dataclass
class Handled:
    """What a handler did: its output, the inverse action if it has one, its evidence."""

    output: Any = None
    inverse: dict[str, Any] | None = None
    events: list[PendingEvent] = field(default_factory=list)


class ActionError(Exception):
    def __init__(self, result: ValidationResult, events: list[PendingEvent] | None = None) -> None:
        super().__init__("; ".join(f"{e.code}: {e.message}" for e in result.errors))
        self.result = result
        self.events: list[PendingEvent] = events or []

    @classmethod
    def single(cls, code: ErrorCode, message: str, path: str = "action") -> ActionError:
        return cls(ValidationResult.single(path, code, message))

    @property
    def code(self) -> str:
        return self.result.errors[0].code


Handler = Callable[[Any], Awaitable[Handled]]


class ActionExecutionLayer(Protocol):
    async def execute(self, action: Any) -> dict[str, Any]: ...


class Executor:
    """Runs actions through one handler per action type."""

    def __init__(self, handlers: Mapping[str, Handler], role: str = "mplp-lsp") -> None:
        self._handlers = dict(handlers)
        self.role = role

    async def execute(self, action: Any) -> dict[str, Any]:
        parsed = parse_action(action)
        if isinstance(parsed, ValidationResult):
            raise ActionError(parsed)
        handler = self._handlers.get(parsed.type)
        if handler is None:
            raise ActionError.single(
                ErrorCode.ENUM, f"this executor runs no {parsed.type} actions", "action.type"
            )
        execution_id = new_id()
        events = [self._event(parsed, execution_id, "running")]
        try:
            handled = await handler(parsed)
        except asyncio.CancelledError:
            events.append(
                self._event(parsed, execution_id, "cancelled", ErrorCode.ACTION_CANCELLED)
            )
            raise
        except ActionError as error:
            events += error.events
            events.append(self._event(parsed, execution_id, "failed", error.code))
            error.events = events
            raise
        except Exception as exc:  # a handler bug must not take the runtime down
            log.exception("%s action raised", parsed.type)
            message = redact(f"{type(exc).__name__}: {exc}")
            wrapped = ActionError.single(ErrorCode.ACTION_FAILED, message)
            events.append(self._event(parsed, execution_id, "failed", wrapped.code))
            wrapped.events = events
            raise wrapped from exc
        events += handled.events
        events.append(self._event(parsed, execution_id, "completed"))
        inverse = handled.inverse if parsed.compensate is None else parsed.compensate
        return {
            "status": "executed",
            "action": parsed.model_dump(mode="json", exclude_none=True),
            "output": handled.output,
            "inverse": inverse,
            "execution_id": execution_id,
            "events": events,
        }

    def _event(
        self, action: Action, execution_id: str, status: str, code: str | None = None
    ) -> PendingEvent:
        payload: dict[str, Any] = {"action_type": action.type}
        if code is not None:
            payload["code"] = code
        event = {
            "event_id": new_id(),
            "event_family": "runtime_execution",
            "event_type": f"action_{'started' if status == 'running' else status}",
            "timestamp": utc_timestamp(),
            "execution_id": execution_id,
            "executor_kind": EXECUTOR_KINDS[action.type],
            "executor_role": self.role,
            "status": status,
            "source_module": "ael",
            "payload": payload,
        }
        return PendingEvent(Kind.RUNTIME_EXECUTION, event)


async def _reference(action: Any) -> Handled:
    return Handled()


def reference_executor() -> Executor:
    """The spec's reference AEL: runs nothing, returns ``{status: "executed", action}``."""
    return Executor(dict.fromkeys(EXECUTOR_KINDS, _reference), role="reference")

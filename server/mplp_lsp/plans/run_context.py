"""A run's RuntimeContext (spec §2.3): its ids, the coordination data agents share, and the
events the current tick has queued. The flow (plans/flow.py) creates and passes it; the plan's
execution (plans/execution.py) queues its events in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mplp_lsp.actions.executor import PendingEvent
from mplp_lsp.protocol.envelope import new_id


@dataclass
class RunIds:
    run_id: str


@dataclass
class Coordination:
    ids: RunIds
    metadata: dict[str, Any] = field(default_factory=dict)  # cross-agent data (MAP profile)


@dataclass
class RuntimeContext:
    ids: RunIds
    coordination: Coordination
    events: list[PendingEvent] = field(default_factory=list)  # this tick's queue

    @classmethod
    def new(cls, run_id: str | None = None) -> RuntimeContext:
        ids = RunIds(run_id or new_id())
        return cls(ids, Coordination(RunIds(ids.run_id)))

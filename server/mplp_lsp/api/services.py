"""What the API works on (kept apart from aiohttp, which loads at the first request)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

from mplp_lsp.engine.intake import Intake
from mplp_lsp.engine.status import WorkspaceStatus
from mplp_lsp.graph.service import PsgService
from mplp_lsp.plans.runs import PlanRuns
from mplp_lsp.store.writer import StoreWriter

if TYPE_CHECKING:
    from mplp_lsp.drift import DriftMonitor
    from mplp_lsp.engine.workspace import Workspace
    from mplp_lsp.forward.service import Forwarding


class ApiServices:
    """What the API works on: one workspace's intake, PSG, plan runs, store and live status."""

    def __init__(
        self,
        intake: Intake,
        psg: PsgService,
        writer: StoreWriter,
        status: Callable[[], Awaitable[WorkspaceStatus]],
        plans: PlanRuns,
        *,
        drift: DriftMonitor | None = None,
        forwarding: Forwarding | None = None,
    ) -> None:
        self.intake, self.psg, self.writer, self.status = intake, psg, writer, status
        self.plans = plans
        # The dashboard's resolutions and forwarding view (mplp_lsp.api.dashboard).
        self.drift, self.forwarding = drift, forwarding

    @classmethod
    def of(cls, workspace: Workspace) -> ApiServices:
        """The API's view of a workspace the daemon records."""
        return cls(
            workspace.intake,
            workspace.psg,
            workspace.writer,
            partial(workspace.status, retention=True),  # `mplp-lsp status` asks here
            workspace.owner.plans,
            drift=workspace.drift,
            forwarding=workspace.forwarding,
        )

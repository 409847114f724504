"""What running a plan needs of the store's owner (``engine.owner.StoreOwner``), as a protocol: the
runtime names what it uses, and does not import the engine that runs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from mplp_lsp.config.settings import Settings
    from mplp_lsp.engine.intake import Intake
    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.graph.service import PsgService
    from mplp_lsp.store.errorlog import IntegrationErrorLog


class StoreSide(Protocol):
    """What a plan's execution needs (plans/execution.py): the graph, the intake, the
    error log, and a wait for the consumers of what it stored."""

    @property
    def psg(self) -> PsgService: ...

    @property
    def intake(self) -> Intake: ...

    @property
    def error_log(self) -> IntegrationErrorLog: ...

    async def drain(self) -> None: ...


class PlanHost(StoreSide, Protocol):
    """What running a plan needs besides (plans/runs.py): the workspace, its settings
    (the VSL, the executor) and its state dir."""

    @property
    def root(self) -> Path: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def paths(self) -> StatePaths: ...

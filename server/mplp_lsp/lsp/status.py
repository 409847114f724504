"""``mplp/status``: asked for as a request, and sent as a notification when it changes (to
clients that asked for it: lsp/lifecycle.py)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from mplp_lsp import __version__
from mplp_lsp.lsp.feature import Feature, handles
from mplp_lsp.lsp.server import MplpLanguageServer

if TYPE_CHECKING:
    from mplp_lsp.engine.workspace import Workspace

STATUS_METHOD = "mplp/status"
_INTERVAL = 0.5


class StatusFeature(Feature[MplpLanguageServer]):
    _due = False
    _last = 0.0

    @handles(STATUS_METHOD)
    async def request(self, _params: Any) -> dict[str, Any]:
        return await self.status()

    async def recording(self, workspace: Workspace) -> None:
        # After every stored event, the consequences of a save (its graph_update) too, so the
        # status bar never lags one event behind.
        async def stored(_events: Any) -> None:
            self.status_changed()

        workspace.bus.subscribe("status", stored)

    def status_changed(self) -> None:
        """Send the status soon, at most twice a second."""
        if self._due or STATUS_METHOD not in self.server.client_notifications:
            return
        self._due = True
        delay = max(0.0, self._last + _INTERVAL - time.monotonic())
        asyncio.get_running_loop().call_later(
            delay, lambda: self.server.spawn(self._send(), "status")
        )

    async def _send(self) -> None:
        self._due = False
        self._last = time.monotonic()
        if not self.server.stopped:
            self.server.notify_client(STATUS_METHOD, await self.status())

    async def status(self) -> dict[str, Any]:
        workspaces = self.server.workspaces
        folders = []
        if workspaces is not None:
            for workspace in workspaces:
                folders.append(
                    {
                        "root": str(workspace.root),
                        "role": "owner",
                        **(await workspace.status()).to_json(),
                    }
                )
            # Folders another process records; this one hands its activity over to it.
            folders.extend(follower.status() for follower in workspaces.followers)
        return {
            "version": __version__,
            "ready": self.server.ready.is_set(),
            "refused": workspaces.refused if workspaces is not None else 0,
            "workspaces": folders,
        }

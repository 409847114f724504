"""``mplp.openDashboard``: the editors' "Open dashboard" command, run by the server.

The server holds each workspace's API token, so it asks its own API for a one-time login
link (as ``mplp-lsp ui`` does) and has the client open it in the system browser
(``window/showDocument`` with ``external: true``). The link itself is returned only to a
client that cannot open it: it logs a browser in, so it is not put in a result that
editors write to their logs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mplp_lsp.lsp.feature import Feature, command

if TYPE_CHECKING:
    from mplp_lsp.lsp.server import MplpLanguageServer

OPEN_COMMAND = "mplp.openDashboard"


async def open_dashboard(server: MplpLanguageServer) -> dict[str, Any]:
    from mplp_lsp.cli.ui import login_link

    await server.ready.wait()
    apis = server.apis
    first = next(iter(server.workspaces or ()), None)
    api = apis.get(first.root) if apis is not None and first is not None else None
    if first is None or api is None:
        return {"error": "no workspace folder with the HTTP API on (see the apiEnabled setting)"}
    link = await asyncio.to_thread(login_link, api.url, str(api.token_file))
    window = server.client_capabilities.window
    if window is not None and window.show_document is not None and window.show_document.support:
        shown = await server.window_show_document_async(
            types.ShowDocumentParams(uri=link, external=True)
        )
        if shown.success:
            return {"root": str(first.root), "shown": True}
    return {"root": str(first.root), "shown": False, "url": link}


class DashboardFeature(Feature):
    @command(OPEN_COMMAND)
    async def open(self, *_args: Any) -> dict[str, Any]:
        return await open_dashboard(self.server)

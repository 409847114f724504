"""``mplp.openDashboard``: the editors' "Open dashboard" command, run by the server.

The server holds each workspace's API token, so it asks its own API for a one-time login
code (as ``mplp-lsp ui`` does), writes the private page that hands the code to the
dashboard into the state dir (0600), and has the client open that page in the system
browser (``window/showDocument`` with ``external: true``). What the editor starts the
browser with is the page's file URL: nothing another local user could log in with, and
nothing that helps anyone who reads the editor's logs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from mplp_lsp.lsp.feature import Feature, command
from mplp_lsp.lsp.server import MplpLanguageServer

OPEN_COMMAND = "mplp.openDashboard"


async def open_dashboard(server: MplpLanguageServer) -> dict[str, Any]:
    from mplp_lsp.cli.ui import request_code
    from mplp_lsp.ui.login_page import write_login_page

    await server.ready.wait()
    apis = server.apis
    first = next(iter(server.workspaces or ()), None)
    api = apis.get(first.root) if apis is not None and first is not None else None
    if first is None or api is None:
        return {"error": "no workspace folder with the HTTP API on (see the apiEnabled setting)"}
    login = await asyncio.to_thread(request_code, api.url, api.token)
    page = (await asyncio.to_thread(write_login_page, first.paths.root, login)).as_uri()
    window = server.client_capabilities.window
    if window is not None and window.show_document is not None and window.show_document.support:
        shown = await server.window_show_document_async(
            types.ShowDocumentParams(uri=page, external=True)
        )
        if shown.success:
            return {"root": str(first.root), "shown": True}
    return {"root": str(first.root), "shown": False, "page": page, "login": login.login_url}


class DashboardFeature(Feature[MplpLanguageServer]):
    @command(OPEN_COMMAND)
    async def open(self, *_args: Any) -> dict[str, Any]:
        return await open_dashboard(self.server)

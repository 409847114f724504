"""Workspace folders added to or removed from the session."""

from __future__ import annotations

import time
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path

from mplp_lsp.lsp.feature import Feature, handles
from mplp_lsp.lsp.server import MplpLanguageServer


class FoldersFeature(Feature[MplpLanguageServer]):
    @handles(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        server = self.server
        named_ns = time.time_ns()  # changes in an added folder are heard of from now on
        await server.ready.wait()
        assert server.workspaces is not None
        for removed in params.event.removed:
            if path := to_fs_path(removed.uri):
                if server.apis is not None:
                    await server.apis.close(Path(path).resolve())
                await server.workspaces.remove(Path(path))
        for added in params.event.added:
            if path := to_fs_path(added.uri):
                await server.add_folder(server.workspaces, Path(path), added.uri, named_ns)

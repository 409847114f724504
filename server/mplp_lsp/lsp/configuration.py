"""Settings changed in the editor: every workspace takes them again."""

from __future__ import annotations

from lsprotocol import types

from mplp_lsp.lsp.feature import Feature, handles
from mplp_lsp.lsp.server import MplpLanguageServer


class ConfigurationFeature(Feature[MplpLanguageServer]):
    @handles(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        server = self.server
        if params.settings and not server.pulls_configuration:
            server.initialization_options = params.settings
        await server.reload_settings()

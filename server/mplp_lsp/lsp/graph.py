"""The project graph's requests (``mplp/psg/...``), answered by the workspace's PSG service."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mplp_lsp.graph.requests import METHODS as PSG_METHODS
from mplp_lsp.lsp.feature import Feature, Handler, json_params
from mplp_lsp.lsp.server import MplpLanguageServer

_NO_WORKSPACE = {
    "ok": False,
    "errors": [{"path": "workspace", "code": "not_found", "message": "no such workspace folder"}],
}


class GraphRequestsFeature(Feature[MplpLanguageServer]):
    def handlers(self) -> Iterator[Handler]:
        for method in PSG_METHODS:
            yield Handler("method", method, self._answer(method))

    def _answer(self, method: str) -> Callable[[Any], Any]:
        async def answer(params: Any) -> dict[str, Any]:
            from mplp_lsp.graph.requests import handle

            await self.server.ready.wait()
            plain = json_params(params)
            folder = plain.pop("workspace", None) if isinstance(plain, dict) else None
            workspace = self.server.workspace_for(folder)
            if workspace is None:
                return _NO_WORKSPACE
            return await handle(workspace.psg, method, plain)

        return answer

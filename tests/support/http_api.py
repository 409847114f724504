"""The loopback HTTP API of a real workspace, served on 127.0.0.1 for one test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mplp_lsp.api.server import ApiServer
from mplp_lsp.api.services import ApiServices
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.graph.inspection import dump


class Api:
    def __init__(self, server: ApiServer, workspace: Workspace, session: aiohttp.ClientSession):
        self.server, self.workspace, self.session = server, workspace, session
        self.headers = {"Authorization": f"Bearer {server.token}"}

    async def call(
        self, method: str, path: str, body: Any = None, **kwargs: Any
    ) -> tuple[int, Any]:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        async with self.session.request(
            method, self.server.url + path, json=body, headers=headers, **kwargs
        ) as response:
            return response.status, await response.json()

    async def events(self, kind: str) -> list[dict[str, Any]]:
        await self.workspace.bus.drain()
        status, page = await self.call("GET", f"/events?kind={kind}")
        assert status == 200
        return [item["envelope"] for item in page["events"]]

    async def dump(self) -> str:
        return await self.workspace.writer.read(dump)


async def started_api(tmp_path: Path) -> tuple[ApiServer, Workspace]:
    """A workspace under ``tmp_path`` and its HTTP API, started."""
    root = tmp_path / "ws"
    root.mkdir()
    workspace = await Workspace.open(root, Settings(), state_dir=tmp_path / "state")
    server = ApiServer(ApiServices.of(workspace), workspace.paths)
    await server.start()
    return server, workspace


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    server, workspace = await started_api(tmp_path)
    try:
        async with aiohttp.ClientSession() as session:
            yield Api(server, workspace, session)
    finally:
        await server.stop()
        await workspace.close()

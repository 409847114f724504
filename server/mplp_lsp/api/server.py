"""Running the API for one workspace: bind 127.0.0.1, write the token and endpoint files.

While it listens, the state dir holds ``api-token`` (0600, a fresh random token each start)
and ``api.json`` (``{url, token_file, pid}``) so scripts and hooks can find it;
``mplp-lsp status --json`` reports the same. Both are removed when it stops.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from mplp_lsp.api.app import Engine, build_app
from mplp_lsp.api.security import allowed_hosts, new_token, write_token
from mplp_lsp.statedir import StatePaths
from mplp_lsp.workspace import Workspace

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
TOKEN_NAME = "api-token"
ENDPOINT_NAME = "api.json"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    token_file: str

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "token_file": self.token_file}


def read_endpoint(paths: StatePaths) -> Endpoint | None:
    """What a running daemon wrote into ``paths``; None if no API is listening there."""
    try:
        data: Any = json.loads((paths.root / ENDPOINT_NAME).read_text(encoding="utf-8"))
        return Endpoint(str(data["url"]), str(data["token_file"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ApiServer:
    def __init__(self, engine: Engine, paths: StatePaths, *, port: int = 0) -> None:
        self._engine = engine
        self._paths = paths
        self._requested_port = port
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.token = new_token()

    @property
    def token_file(self) -> Path:
        return self._paths.root / TOKEN_NAME

    @property
    def endpoint_file(self) -> Path:
        return self._paths.root / ENDPOINT_NAME

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    async def start(self) -> Endpoint:
        write_token(self.token_file, self.token)
        hosts: frozenset[str] = frozenset()
        app = build_app(self._engine, self.token, lambda: hosts)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, HOST, self._requested_port, reuse_address=False)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        hosts = allowed_hosts(self.port)
        endpoint = Endpoint(self.url, str(self.token_file))
        payload = {**endpoint.to_json(), "pid": os.getpid()}
        temporary = self.endpoint_file.with_name(f".{ENDPOINT_NAME}.tmp")
        temporary.write_text(json.dumps(payload), encoding="utf-8")
        temporary.replace(self.endpoint_file)
        log.info("HTTP API listening on %s", self.url)
        return endpoint

    async def stop(self) -> None:
        for path in (self.endpoint_file, self.token_file):
            path.unlink(missing_ok=True)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


async def start_api(workspace: Workspace, port: int) -> ApiServer | None:
    """Start the API, or log why not (a taken port must not stop the daemon recording)."""
    engine = Engine(workspace.intake, workspace.psg, workspace.writer)
    server = ApiServer(engine, workspace.paths, port=port)
    try:
        await server.start()
    except OSError as error:
        log.warning("the HTTP API could not listen on %s:%s: %s", HOST, port, error)
        await server.stop()
        return None
    return server

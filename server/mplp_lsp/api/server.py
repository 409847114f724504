"""Running the API for one workspace: bind 127.0.0.1, write the token and endpoint files.

While it listens, the state dir holds ``api-token`` (0600, a fresh random token each start)
and ``api.json`` (``{url, pid}``) so scripts and hooks can find it; ``mplp-lsp status
--json`` reports the same. Both are removed when it stops.

The socket is bound and listening from the start, but aiohttp (about 11 MiB of an idle
daemon's memory, which is kept within twice a bare pygls server's) is loaded only when the
first connection arrives: most sessions never get a request. That connection waits in the
kernel's backlog meanwhile and is then served like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from mplp_lsp.api.credentials import IDLE_TIMEOUT, allowed_hosts, new_token
from mplp_lsp.api.endpoint import ENDPOINT_NAME, TOKEN_NAME, Endpoint
from mplp_lsp.api.services import ApiServices
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.private import write_private
from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.engine.workspace import Workspace

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
_BACKLOG = 128
# Seconds a request still in progress at stop may take to finish before it is cancelled. Without
# a bound, aiohttp waits up to a minute, and a client still sending a refused body (aiohttp
# reads on for 10 s so that the client sees the 413) held every stop of the daemon that long.
STOP_GRACE = 2.0


class ApiServer:
    def __init__(self, services: ApiServices, paths: StatePaths, *, port: int = 0) -> None:
        self._services = services
        self._paths = paths
        self._requested_port = port
        self._socket: socket.socket | None = None
        self._serving: asyncio.Task[None] | None = None
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
        write_private(self.token_file, self.token.encode())
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # No SO_REUSEADDR: a port another process holds is refused, not shared.
            listener.bind((HOST, self._requested_port))
            listener.listen(_BACKLOG)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
        self._socket = listener
        self.port = int(listener.getsockname()[1])
        asyncio.get_running_loop().add_reader(listener.fileno(), self._first_connection)
        endpoint = Endpoint(self.url)
        write_private(
            self.endpoint_file, json.dumps({**endpoint.to_json(), "pid": os.getpid()}).encode()
        )
        log.info("HTTP API listening on %s", self.url)
        return endpoint

    def _first_connection(self) -> None:
        self._stop_waiting()
        self._serving = asyncio.get_running_loop().create_task(self._serve(), name="api-serve")

    def _stop_waiting(self) -> None:
        """Stop watching for the first connection (watched while nothing serves yet)."""
        if self._serving is None and self._socket is not None:
            asyncio.get_running_loop().remove_reader(self._socket.fileno())

    async def _serve(self) -> None:
        """Load aiohttp and hand it the listening socket (at the first connection)."""
        from aiohttp import web

        from mplp_lsp.api.app import build_app

        assert self._socket is not None and self.port is not None
        hosts = allowed_hosts(self.port)
        runner = web.AppRunner(
            build_app(self._services, self.token, lambda: hosts),
            access_log=None,
            handle_signals=False,
            keepalive_timeout=IDLE_TIMEOUT,
            shutdown_timeout=STOP_GRACE,
        )
        try:
            await runner.setup()
            await web.SockSite(runner, self._socket).start()
        except Exception:
            log.exception("the HTTP API could not start serving on %s", self.url)
            await runner.cleanup()
            self._socket.close()  # refused from now on, rather than left hanging
            return
        self._runner = runner

    async def stop(self) -> None:
        for path in (self.endpoint_file, self.token_file):
            path.unlink(missing_ok=True)
        self._stop_waiting()
        if self._serving is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._serving
        if self._runner is not None:
            runner, self._runner = self._runner, None
            # A streaming plan run would hold the cleanup for its whole run: stop it first.
            await self._services.plans.close()
            await runner.cleanup()  # closes the socket with the server
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def api_port(settings: Settings) -> int | None:
    """The port to serve on (0: any free one), or None when the API is switched off."""
    return settings.api_port if settings.api_enabled else None


async def start_api(workspace: Workspace, port: int) -> ApiServer | None:
    """Start the API, or log why not (a taken port must not stop the daemon recording)."""
    services = ApiServices.of(workspace)
    server = ApiServer(services, workspace.paths, port=port)
    try:
        await server.start()
    except OSError as error:
        log.warning("the HTTP API could not listen on %s:%s: %s", HOST, port, error)
        await server.stop()
        return None
    from mplp_lsp.ui.rollup import RollupFolder

    workspace.bus.subscribe("timeline", RollupFolder(workspace.writer).handle)
    return server


class ApiServers:
    """One API per open workspace (each workspace has its own store), for a front end."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._servers: dict[Path, ApiServer] = {}

    async def open(self, workspace: Workspace) -> ApiServer | None:
        if workspace.root in self._servers:
            return self._servers[workspace.root]
        server = await start_api(workspace, self._port)
        if server is not None:
            self._servers[workspace.root] = server
        return server

    def get(self, root: Path) -> ApiServer | None:
        return self._servers.get(root)

    async def close(self, root: Path) -> None:
        server = self._servers.pop(root, None)
        if server is not None:
            await server.stop()

    async def close_all(self) -> None:
        for root in list(self._servers):
            await self.close(root)

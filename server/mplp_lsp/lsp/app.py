"""The language server with its features: what ``mplp-lsp serve`` runs (over stdio, or TCP).

The features are listed here, not in lsp/server.py: each feature names the server it serves
(for its types), so the server does not import them back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from mplp_lsp.lsp.configuration import ConfigurationFeature
from mplp_lsp.lsp.dashboard import DashboardFeature
from mplp_lsp.lsp.documents import DocumentsFeature
from mplp_lsp.lsp.drift import DriftFeature
from mplp_lsp.lsp.feature import Feature
from mplp_lsp.lsp.files import FileOperationsFeature
from mplp_lsp.lsp.folders import FoldersFeature
from mplp_lsp.lsp.graph import GraphRequestsFeature
from mplp_lsp.lsp.hooks import HooksFeature
from mplp_lsp.lsp.lifecycle import LifecycleFeature
from mplp_lsp.lsp.plan_run import PlanRunFeature
from mplp_lsp.lsp.quick_fixes import QuickFixesFeature
from mplp_lsp.lsp.server import MplpLanguageServer
from mplp_lsp.lsp.status import StatusFeature
from mplp_lsp.lsp.stdio import serve_stdio
from mplp_lsp.lsp.tools import ToolsFeature
from mplp_lsp.process.exit_bound import exit_within, stop_on_signals

if TYPE_CHECKING:
    from mplp_lsp.config.sources import Layer
    from mplp_lsp.lsp.handshake import EarlyStart

# The server's features, in the order they are told that a workspace is being recorded.
FEATURES: tuple[type[Feature[MplpLanguageServer]], ...] = (
    LifecycleFeature,
    DocumentsFeature,
    FileOperationsFeature,
    FoldersFeature,
    ConfigurationFeature,
    StatusFeature,
    DriftFeature,
    QuickFixesFeature,
    ToolsFeature,
    HooksFeature,
    GraphRequestsFeature,
    PlanRunFeature,
    DashboardFeature,
)


def create_server(
    *,
    state_dir: str | None = None,
    remote_url: str | None = None,
    flags: Layer | None = None,
    configure: Callable[[], Layer] | None = None,
) -> MplpLanguageServer:
    return MplpLanguageServer(
        state_dir=state_dir,
        remote_url=remote_url,
        flags=flags,
        configure=configure,
        features=FEATURES,
    )


def serve(
    *,
    state_dir: str | None = None,
    tcp: tuple[str, int] | None = None,
    remote_url: str | None = None,
    configure: Callable[[], Layer] | None = None,
    early: EarlyStart | None = None,
) -> int:
    """``early``: what was read of stdin and answered before the server was loaded."""
    server = create_server(state_dir=state_dir, remote_url=remote_url, configure=configure)
    if tcp is not None:
        server.start_tcp(*tcp)
        return 0
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        asyncio.run(_serve_stdio(server, early))
    exit_within()  # the interpreter's own exit joins threads, which must not hang either
    return server.exit_code


async def _serve_stdio(server: MplpLanguageServer, early: EarlyStart | None) -> None:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def stop_reading() -> None:
        loop.call_soon_threadsafe(main.cancel)

    server.stop_reading = stop_reading
    stop_on_signals(loop, stop_reading)
    try:
        await serve_stdio(server, server.stop_engine, early=early)
    except asyncio.CancelledError:
        await server.stop_engine()

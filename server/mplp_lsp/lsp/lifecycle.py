"""The session's life: ``initialize``, ``initialized``, ``shutdown`` and ``exit``.

Nothing heavy happens before ``initialized``; from there the engine starts in the background
and the editor is asked to report file changes when its watcher covers the workspace
(:func:`client_watches`); otherwise the server watches each folder it records itself, with
the engine of ``mplp-lsp watch``.

The initialization options are the editor's settings (:mod:`mplp_lsp.config`), except
:data:`NOTIFICATIONS_OPTION`: the server's own notifications the client handles (the VS Code
extension and the Neovim plugin list ``mplp/status``). Other clients are sent none: lsp-mode
warns in a window about every notification it does not know. And :data:`HELD_SINCE_OPTION`:
since when the client held the editor's file activity for a server that was not running yet
(the VS Code extension, from its activation: it starts the server only after checking the
interpreter). A workspace's first baseline is cut there rather than at this process's start, so
that a save made meanwhile is a change; never more than :data:`HELD_SINCE_LIMIT_NS` earlier.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from lsprotocol import types

from mplp_lsp.lsp.feature import Feature, handles
from mplp_lsp.lsp.server import MplpLanguageServer
from mplp_lsp.lsp.stdio import watch_parent
from mplp_lsp.process.exit_bound import exit_within
from mplp_lsp.process.start import STARTED_NS

# Named on their own, so a client that leaves dot-directories out of "**/*" still reports them.
# A change there makes the Git source poll at once (Workspace.observe).
_GIT_GLOBS = ("**/.git/HEAD", "**/.git/refs/**", "**/.git/packed-refs", "**/.git/logs/**")
NOTIFICATIONS_OPTION = "notifications"
HELD_SINCE_OPTION = "heldSince"  # ms since the epoch
# A client's clock or a slow start can put that moment far back; files changed since it are
# taken for changes rather than learnt as they were, so how far back it may go is bounded.
HELD_SINCE_LIMIT_NS = 10 * 60 * 1_000_000_000
log = logging.getLogger(__name__)


class LifecycleFeature(Feature[MplpLanguageServer]):
    @handles(types.INITIALIZE)
    def initialize(self, params: types.InitializeParams) -> None:
        server = self.server
        options = params.initialization_options
        if isinstance(options, dict):
            options = dict(options)
            asked = options.pop(NOTIFICATIONS_OPTION, None)
            if isinstance(asked, list):
                server.client_notifications = frozenset(m for m in asked if isinstance(m, str))
            server.heard_since_ns = heard_since(options.pop(HELD_SINCE_OPTION, None))
        server.initialization_options = options
        if params.process_id and params.process_id != os.getpid():
            server.parent_pid = params.process_id

    @handles(types.INITIALIZED)
    def initialized(self, _params: types.InitializedParams) -> None:
        server = self.server
        if server.parent_pid:
            server.spawn(watch_parent(server.parent_pid, server.stop_reading), "watch-editor")
        if client_watches(server.client_capabilities):
            server.spawn(self._register_watchers(), "register-watchers")
        else:
            server.watches_disk = True
        server.spawn(server.start_engine(), "start-engine")

    async def _register_watchers(self) -> None:
        registration = types.Registration(
            id="mplp-watched-files",
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[
                    types.FileSystemWatcher(glob_pattern=glob) for glob in ("**/*", *_GIT_GLOBS)
                ]
            ),
        )
        try:
            await self.server.client_register_capability_async(
                types.RegistrationParams(registrations=[registration])
            )
        except Exception as error:  # refused: the editor will not watch, so the server does
            log.warning("the editor refused to watch the workspace (%s); watching it here", error)
            self.server.watch_disk()

    @handles(types.SHUTDOWN)
    async def shutdown(self, _params: Any) -> None:
        # Commit pending activity before the editor goes away.
        await self.server.stop_engine()

    @handles(types.EXIT)
    def exit(self, _params: Any) -> None:
        # pygls raises SystemExit from inside the event loop next; asyncio's shutdown after
        # that has hung (the store still open), so the end is bounded from here on.
        exit_within()


def client_watches(capabilities: types.ClientCapabilities) -> bool:
    """Whether the editor watches the workspace for the server: it registers watchers
    dynamically, and its watcher is the LSP 3.17 one (relative patterns), which VS Code and
    Neovim 0.10+ have. Older watchers watch part of a tree: eglot 1.9 only the directories
    that held files when it registered, and it drops renames; so for them, and for an editor
    that does not watch at all, the server watches each folder it records itself."""
    workspace = capabilities.workspace
    watched = workspace.did_change_watched_files if workspace else None
    return bool(watched and watched.dynamic_registration and watched.relative_pattern_support)


def heard_since(held_since_ms: object) -> int:
    """Since when this process can hear of its first folders' changes: its start, or earlier
    when the client held the editor's activity since then (bounded; anything but a number of
    milliseconds is ignored)."""
    if isinstance(held_since_ms, bool) or not isinstance(held_since_ms, int | float):
        return STARTED_NS
    if not math.isfinite(held_since_ms):
        return STARTED_NS
    held_ns = int(held_since_ms * 1_000_000)
    return max(min(held_ns, STARTED_NS), STARTED_NS - HELD_SINCE_LIMIT_NS)

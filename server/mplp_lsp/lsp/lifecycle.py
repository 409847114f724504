"""The session's life: ``initialize``, ``initialized``, ``shutdown`` and ``exit``.

Nothing heavy happens before ``initialized``; from there the engine starts in the background
and the editor is asked to report file changes (when it can register watchers)."""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types

from mplp_lsp.exit_bound import exit_within
from mplp_lsp.lsp.feature import Feature, handles
from mplp_lsp.lsp.stdio import watch_parent

# Named on their own, so a client that leaves dot-directories out of "**/*" still reports them.
# A change there makes the Git source poll at once (Workspace.observe).
_GIT_GLOBS = ("**/.git/HEAD", "**/.git/refs/**", "**/.git/packed-refs", "**/.git/logs/**")


class LifecycleFeature(Feature):
    @handles(types.INITIALIZE)
    def initialize(self, params: types.InitializeParams) -> None:
        server = self.server
        server.initialization_options = params.initialization_options
        if params.process_id and params.process_id != os.getpid():
            server.parent_pid = params.process_id

    @handles(types.INITIALIZED)
    def initialized(self, _params: types.InitializedParams) -> None:
        server = self.server
        if server.parent_pid:
            server.spawn(watch_parent(server.parent_pid, server.stop_reading), "watch-editor")
        watched = (
            server.client_capabilities.workspace
            and server.client_capabilities.workspace.did_change_watched_files
        )
        if watched and watched.dynamic_registration:
            registration = types.Registration(
                id="mplp-watched-files",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[
                        types.FileSystemWatcher(glob_pattern=glob) for glob in ("**/*", *_GIT_GLOBS)
                    ]
                ),
            )
            server.client_register_capability(
                types.RegistrationParams(registrations=[registration]), callback=lambda _r: None
            )
        server.spawn(server.start_engine(), "start-engine")

    @handles(types.SHUTDOWN)
    async def shutdown(self, _params: Any) -> None:
        # Commit pending activity before the editor goes away.
        await self.server.stop_engine()

    @handles(types.EXIT)
    def exit(self, _params: Any) -> None:
        # pygls raises SystemExit from inside the event loop next; asyncio's shutdown after
        # that has hung (the store still open), so the end is bounded from here on.
        exit_within()

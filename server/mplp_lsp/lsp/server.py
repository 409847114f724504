"""``mplp-lsp serve``: the language server.

Handlers only translate LSP notifications into calls on the workspace engine; everything
else lives in the core. Start-up stays as cheap as pygls itself: the store, the schema
validators and the rest of the engine are imported and opened only after ``initialized``,
and nothing is sent to the client before it. Activity reported before the engine is ready
is queued and replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from mplp_lsp import __version__
from mplp_lsp.lsp import drift, hooks, tools
from mplp_lsp.lsp.protocol import MplpProtocol
from mplp_lsp.lsp.stdio import exit_within, serve_stdio, watch_parent
from mplp_lsp.runtime.psg_requests import METHODS as PSG_METHODS

if TYPE_CHECKING:
    from mplp_lsp.api.server import ApiServers
    from mplp_lsp.config import Resolved
    from mplp_lsp.config.sources import Layer
    from mplp_lsp.workspace import Workspace
    from mplp_lsp.workspaces import Workspaces

log = logging.getLogger(__name__)

STATUS_NOTIFICATION = "mplp/status"
STATUS_REQUEST = "mplp/status"
_STATUS_INTERVAL = 0.5
_CONFIG_TIMEOUT = 5.0
_EARLY_LIMIT = 100_000
_YIELD_EVERY = 200
_EVERY_FILE = types.FileOperationRegistrationOptions(
    filters=[types.FileOperationFilter(pattern=types.FileOperationPattern(glob="**/*"))]
)
_WATCHED_CHANGE = {
    types.FileChangeType.Created: "created",
    types.FileChangeType.Changed: "modified",
    types.FileChangeType.Deleted: "deleted",
}


class MplpLanguageServer(LanguageServer):
    def __init__(
        self,
        *,
        state_dir: str | None = None,
        remote_url: str | None = None,
        flags: Layer | None = None,
    ) -> None:
        super().__init__(
            "mplp-lsp",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=MplpProtocol,
        )
        self.state_dir = state_dir
        self.remote_url = remote_url
        self.flags = flags  # the command line's settings, over every other source
        self.apis: ApiServers | None = None
        self.initialization_options: Any = None
        self.workspaces: Workspaces | None = None
        self.ready = asyncio.Event()
        self.failed_to_start: str | None = None
        self._early: list[Callable[[], None]] = []
        self._status_due = False
        self._last_status = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False
        self.parent_pid: int | None = None
        # How to stop reading input when the editor is gone; stdio replaces it.
        self.stop_reading: Callable[[], None] = self.shutdown
        self.drift = drift.DriftFeature(self)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls would pop an error dialog per background exception; a daemon logs instead.
        log.error(
            "internal error (%s): %s", getattr(source, "__name__", source), error, exc_info=error
        )

    def spawn(self, coroutine: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    # --- routing activity -----------------------------------------------------------------

    def activity(
        self,
        change: str,
        uri: str,
        *,
        previous: str | None = None,
        origin: str = "editor",
        language: str | None = None,
        directories: dict[str, Any] | None = None,
    ) -> None:
        if self.workspaces is None:
            if len(self._early) < _EARLY_LIMIT:
                self._early.append(
                    lambda: self.activity(
                        change, uri, previous=previous, origin=origin, language=language
                    )
                )
            return
        from mplp_lsp.sources.debounce import Change

        if _is_file_uri(uri, previous, self.workspaces):
            self.workspaces.observe(
                Change(change),
                uri,
                previous=previous,
                origin=origin,
                language=language,
                directories=directories,
            )

    def document(self, uri: str, action: Callable[[Any, str], None]) -> None:
        """Run ``action(workspace, relative_path)`` for a document inside a workspace (one
        this server records, or one it follows: both keep the editor's documents)."""
        if self.workspaces is None:
            if len(self._early) < _EARLY_LIMIT:
                self._early.append(lambda: self.document(uri, action))
            return
        from mplp_lsp.sanitize.paths import PathRejected

        try:
            workspace, path = self.workspaces.route(uri)
        except PathRejected:
            return  # refused and counted when the document's activity is observed
        action(workspace, path)

    # --- engine life cycle ------------------------------------------------------------------

    async def start_engine(self) -> None:
        loop = asyncio.get_running_loop()
        # The heavy imports and the validator compile run off the loop: requests keep flowing.
        await loop.run_in_executor(None, _warm_up)
        from mplp_lsp.workspace import Workspace
        from mplp_lsp.workspaces import Workspaces

        workspaces = Workspaces(
            state_dir=self.state_dir,
            remote_url=self.remote_url,
            reconfigure=lambda root: self._settings_for(root.as_uri()),
        )
        workspaces.on_promoted(self.recording)
        for root, folder_uri in self._folders():
            settings = await self._settings_for(folder_uri)
            try:
                workspace = await workspaces.add(root, settings)
            except Exception as exc:
                log.exception("cannot open workspace %s", root)
                self._warn(f"mplp-lsp is not recording {root}: {exc}")
                continue
            if isinstance(workspace, Workspace):
                await self.recording(workspace)
            else:  # following another editor's server: its status shows what it handed over
                workspace.on_commit(lambda _count: self.status_changed())
        self.workspaces = workspaces
        early, self._early = self._early, []
        for replay in early:
            replay()
        self.ready.set()
        self.status_changed()

    async def recording(self, workspace: Workspace) -> None:
        """This server owns the workspace's store (from the start, or took it over): its
        drift as diagnostics, and the status after every stored event, the consequences of a
        save (its graph_update) too, so the status bar never lags one event behind."""

        async def stored(_events: Any) -> None:
            self.status_changed()

        workspace.bus.subscribe("status", stored)
        self.drift.attach(workspace)
        await self.open_api(workspace)
        self.status_changed()

    async def open_api(self, workspace: Workspace) -> None:
        """Serve the loopback HTTP API for this workspace, unless it is switched off."""
        from mplp_lsp.api.server import ApiServers, api_port

        port = api_port(workspace.settings)
        if port is not None:
            if self.apis is None:
                self.apis = ApiServers(port)
            await self.apis.open(workspace)

    def _folders(self) -> list[tuple[Path, str | None]]:
        folders = []
        for folder in self.workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                folders.append((Path(path), folder.uri))
        if not folders and self.workspace.root_path:
            folders.append((Path(self.workspace.root_path), self.workspace.root_uri))
        return folders

    async def _settings_for(self, folder_uri: str | None) -> Resolved:
        """The folder's configuration: what the editor sends, layered over the files, under
        the environment and the command line (:mod:`mplp_lsp.config`)."""
        from mplp_lsp.config import resolve

        raw: Any = self.initialization_options
        if _supports(self.client_capabilities, "workspace", "configuration"):
            request = self.workspace_configuration_async(
                types.ConfigurationParams(
                    items=[types.ConfigurationItem(scope_uri=folder_uri, section="mplp")]
                )
            )
            try:
                # shield: a late answer must find its future alive (pygls issue #621)
                [pulled] = await asyncio.wait_for(asyncio.shield(request), _CONFIG_TIMEOUT)
                if pulled:
                    raw = [raw, pulled] if raw else pulled
            except (TimeoutError, ValueError):
                log.warning("the editor did not send settings in time; using initializationOptions")
            except Exception:
                log.exception("workspace/configuration failed; using initializationOptions")
        path = to_fs_path(folder_uri) if folder_uri else None
        root = Path(path) if path else None
        resolved = resolve(root, editor=raw, folder_uri=folder_uri, flags=self.flags)
        for warning in resolved.warnings:
            log.warning("settings: %s", warning)
        return resolved

    async def reload_settings(self) -> None:
        if self.workspaces is None:
            return
        for workspace in self.workspaces:
            workspace.apply_config(await self._settings_for(workspace.root.as_uri()))

    def _warn(self, message: str) -> None:
        log.warning("%s", message)
        self.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Warning, message=message)
        )

    async def stop_engine(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.apis is not None:
            await self.apis.close_all()
        if self.workspaces is not None:
            await self.workspaces.close()
        for task in list(self._tasks):
            task.cancel()

    # --- status ----------------------------------------------------------------------------

    def status_changed(self) -> None:
        """Send ``mplp/status`` soon, at most twice a second."""
        if self._status_due:
            return
        self._status_due = True
        delay = max(0.0, self._last_status + _STATUS_INTERVAL - time.monotonic())
        asyncio.get_running_loop().call_later(
            delay, lambda: self.spawn(self._send_status(), "status")
        )

    async def _send_status(self) -> None:
        self._status_due = False
        self._last_status = time.monotonic()
        if not self._stopped:
            self.protocol.notify(STATUS_NOTIFICATION, await self.status())

    def workspace_for(self, folder: Any) -> Workspace | None:
        """The workspace of a folder URI or path; the first one when none is named."""
        if self.workspaces is None:
            return None
        if folder is None:
            return next(iter(self.workspaces), None)
        from mplp_lsp.sanitize.paths import PathRejected

        try:
            return self.workspaces.locate(str(folder))[0]
        except PathRejected:
            return None

    async def status(self) -> dict[str, Any]:
        folders = []
        if self.workspaces is not None:
            for workspace in self.workspaces:
                folders.append(
                    {
                        "root": str(workspace.root),
                        "role": "owner",
                        **(await workspace.status()).to_json(),
                    }
                )
            # Folders another process records; this one hands its activity over to it.
            folders.extend(follower.status() for follower in self.workspaces.followers)
        return {
            "version": __version__,
            "ready": self.ready.is_set(),
            "refused": self.workspaces.refused if self.workspaces is not None else 0,
            "workspaces": folders,
        }


# Named on their own, so a client that leaves dot-directories out of "**/*" still reports them.
# A change there makes the Git source poll at once (Workspace.observe).
_GIT_GLOBS = ("**/.git/HEAD", "**/.git/refs/**", "**/.git/packed-refs", "**/.git/logs/**")


def _is_file_uri(uri: str, previous: str | None, workspaces: Workspaces) -> bool:
    """Editors name files by ``file:`` URIs; anything else is refused, never read as a path."""
    for candidate in (uri, previous):
        if candidate is not None and not candidate.startswith("file:"):
            from mplp_lsp.protocol.result import ErrorCode
            from mplp_lsp.sanitize.paths import PathRejected

            workspaces.refuse(candidate, PathRejected(ErrorCode.UNSUPPORTED_URI, "not a file: URI"))
            return False
    return True


def _warm_up() -> None:
    from mplp_lsp.protocol.validator import default_validator
    from mplp_lsp.workspaces import Workspaces  # noqa: F401  (imports the whole engine)

    default_validator()


def _supports(capabilities: Any, *path: str) -> bool:
    node = capabilities
    for name in path:
        node = getattr(node, name, None)
        if node is None:
            return False
    return bool(node)


def create_server(
    *,
    state_dir: str | None = None,
    remote_url: str | None = None,
    flags: Layer | None = None,
) -> MplpLanguageServer:
    server = MplpLanguageServer(state_dir=state_dir, remote_url=remote_url, flags=flags)

    @server.feature(types.INITIALIZE)
    def initialize(ls: MplpLanguageServer, params: types.InitializeParams) -> None:
        ls.initialization_options = params.initialization_options
        if params.process_id and params.process_id != os.getpid():
            ls.parent_pid = params.process_id

    @server.feature(types.INITIALIZED)
    def initialized(ls: MplpLanguageServer, _params: types.InitializedParams) -> None:
        if ls.parent_pid:
            ls.spawn(watch_parent(ls.parent_pid, ls.stop_reading), "watch-editor")
        watched = (
            ls.client_capabilities.workspace
            and ls.client_capabilities.workspace.did_change_watched_files
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
            ls.client_register_capability(
                types.RegistrationParams(registrations=[registration]), callback=lambda _r: None
            )
        ls.spawn(ls.start_engine(), "start-engine")

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: MplpLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        ls.document(
            item.uri, lambda ws, path: ws.documents.opened(path, item.language_id, item.text)
        )

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MplpLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.document(params.text_document.uri, lambda ws, path: ws.documents.closed(path))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: MplpLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        document = ls.workspace.text_documents.get(uri)
        text = params.text if params.text is not None else (document.source if document else None)
        ls.document(uri, lambda ws, path: ws.documents.saved(path, text))
        ls.activity("modified", uri, language=document.language_id if document else None)

    @server.feature(types.TEXT_DOCUMENT_WILL_SAVE)
    def will_save(ls: MplpLanguageServer, params: types.WillSaveTextDocumentParams) -> None:
        from mplp_lsp.sources.debounce import WILL_SAVE

        # The save's quiet period starts here; the didSave that follows completes it.
        ls.activity("modified", params.text_document.uri, origin=WILL_SAVE)

    @server.feature(types.WORKSPACE_DID_CREATE_FILES, _EVERY_FILE)
    def did_create(ls: MplpLanguageServer, params: types.CreateFilesParams) -> None:
        for created in params.files:
            ls.activity("created", created.uri)

    @server.feature(types.WORKSPACE_DID_DELETE_FILES, _EVERY_FILE)
    def did_delete(ls: MplpLanguageServer, params: types.DeleteFilesParams) -> None:
        for deleted in params.files:
            ls.activity("deleted", deleted.uri)

    @server.feature(types.WORKSPACE_DID_RENAME_FILES, _EVERY_FILE)
    def did_rename(ls: MplpLanguageServer, params: types.RenameFilesParams) -> None:
        for renamed in params.files:
            for old_uri, new_uri in _expand_directory_rename(renamed.old_uri, renamed.new_uri):
                ls.activity("renamed", new_uri, previous=old_uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched(
        ls: MplpLanguageServer, params: types.DidChangeWatchedFilesParams
    ) -> None:
        # Parent directories are inspected once per slice; a slice runs without yielding, so
        # what the cache holds is never older than the slice.
        directories: dict[str, Any] = {}
        for index, event in enumerate(params.changes, 1):
            change = _WATCHED_CHANGE.get(event.type)
            if change is not None:
                ls.activity(change, event.uri, origin="watcher", directories=directories)
            if index % _YIELD_EVERY == 0:
                directories = {}
                await asyncio.sleep(0)  # a 20,000-file burst must not stall requests

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(
        ls: MplpLanguageServer, params: types.DidChangeWorkspaceFoldersParams
    ) -> None:
        await ls.ready.wait()
        assert ls.workspaces is not None
        for removed in params.event.removed:
            if path := to_fs_path(removed.uri):
                if ls.apis is not None:
                    await ls.apis.close(Path(path).resolve())
                await ls.workspaces.remove(Path(path))
        for added in params.event.added:
            if path := to_fs_path(added.uri):
                from mplp_lsp.workspace import Workspace

                workspace = await ls.workspaces.add(Path(path), await ls._settings_for(added.uri))
                if isinstance(workspace, Workspace):  # a follower is attached when promoted
                    await ls.recording(workspace)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: MplpLanguageServer, params: types.DidChangeConfigurationParams
    ) -> None:
        if params.settings and not _supports(ls.client_capabilities, "workspace", "configuration"):
            ls.initialization_options = params.settings
        await ls.reload_settings()

    @server.feature(STATUS_REQUEST)
    async def status(ls: MplpLanguageServer, _params: Any) -> dict[str, Any]:
        return await ls.status()

    drift.register(server)
    tools.register(server)
    hooks.register(server)
    for method in PSG_METHODS:
        server.feature(method)(_psg_request(method))

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: MplpLanguageServer, _params: Any) -> None:
        # Commit pending activity before the editor goes away.
        await ls.stop_engine()

    @server.feature(types.EXIT)
    def exit_(ls: MplpLanguageServer, _params: Any) -> None:
        # pygls raises SystemExit from inside the event loop next; asyncio's shutdown after
        # that has hung (the store still open), so the end is bounded from here on.
        exit_within()

    return server


def _psg_request(method: str) -> Callable[[MplpLanguageServer, Any], Any]:
    async def handler(ls: MplpLanguageServer, params: Any) -> dict[str, Any]:
        from mplp_lsp.runtime.psg_requests import handle

        await ls.ready.wait()
        plain = _plain(params)
        workspace = ls.workspace_for(
            plain.pop("workspace", None) if isinstance(plain, dict) else None
        )
        if workspace is None:
            return {
                "ok": False,
                "errors": [
                    {
                        "path": "workspace",
                        "code": "not_found",
                        "message": "no such workspace folder",
                    }
                ],
            }
        return await handle(workspace.psg, method, plain)

    return handler


def _plain(params: Any) -> Any:
    """pygls hands unknown requests' params over as namedtuples; the core takes JSON."""
    if hasattr(params, "_asdict"):
        return {key: _plain(value) for key, value in params._asdict().items()}
    if isinstance(params, list | tuple):
        return [_plain(item) for item in params]
    return params


def _expand_directory_rename(old_uri: str, new_uri: str) -> list[tuple[str, str]]:
    """A renamed directory renames every file in it; the editor sends only the directory."""
    new_path = to_fs_path(new_uri)
    if not new_path or not Path(new_path).is_dir():
        return [(old_uri, new_uri)]
    pairs = []
    for folder, _dirs, files in os.walk(new_path):
        for name in files:
            relative = Path(folder, name).relative_to(new_path).as_posix()
            pairs.append((f"{old_uri.rstrip('/')}/{relative}", Path(folder, name).as_uri()))
    return pairs


def serve(
    *,
    state_dir: str | None = None,
    tcp: tuple[str, int] | None = None,
    remote_url: str | None = None,
    flags: Layer | None = None,
) -> int:
    server = create_server(state_dir=state_dir, remote_url=remote_url, flags=flags)
    if tcp is not None:
        server.start_tcp(*tcp)
        return 0
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        asyncio.run(_serve_stdio(server))
    exit_within()  # the interpreter's own exit joins threads, which must not hang either
    return 0


async def _serve_stdio(server: MplpLanguageServer) -> None:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def stop_reading() -> None:
        loop.call_soon_threadsafe(main.cancel)

    server.stop_reading = stop_reading
    try:
        await serve_stdio(server, server.stop_engine)
    except asyncio.CancelledError:
        await server.stop_engine()

"""``mplp-lsp serve``: the language server.

The server routes what the editor reports to the workspace engine and runs the engine's life
cycle; what it answers is in its features (lsp/feature.py), one class per job, registered in
:func:`create_server`. Start-up stays as cheap as pygls itself: the settings, the store and
the rest of the engine are read, imported and opened only after ``initialized`` (the schema
validators at the first activity), and nothing is sent to the client before it. Activity
reported before the engine is ready is queued and replayed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from mplp_lsp import __version__
from mplp_lsp.lsp import feature
from mplp_lsp.lsp.protocol import MplpProtocol

if TYPE_CHECKING:
    from mplp_lsp.api.server import ApiServers
    from mplp_lsp.config import Resolved
    from mplp_lsp.config.sources import Layer
    from mplp_lsp.engine.workspace import Workspace
    from mplp_lsp.engine.workspaces import Route, Workspaces
    from mplp_lsp.sanitize.paths import PathRejected

log = logging.getLogger(__name__)

_CONFIG_TIMEOUT = 5.0
_EARLY_LIMIT = 100_000
F = TypeVar("F", bound=feature.Feature[Any])


class MplpLanguageServer(LanguageServer):
    def __init__(
        self,
        *,
        state_dir: str | None = None,
        remote_url: str | None = None,
        flags: Layer | None = None,
        configure: Callable[[], Layer] | None = None,
        features: Sequence[type[feature.Feature[MplpLanguageServer]]] = (),
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
        # Reads the process's configuration and gives the flags, when the engine starts.
        self._configure = configure
        self.apis: ApiServers | None = None
        self.initialization_options: Any = None
        # The server's own notifications this client asked for (lsp/lifecycle.py).
        self.client_notifications: frozenset[str] = frozenset()
        # Since when the folders of ``initialize`` can be heard of (lsp/lifecycle.py).
        self.heard_since_ns: int | None = None
        # Whether the server watches its folders itself (the editor does not: lifecycle.py).
        self.watches_disk = False
        self.workspaces: Workspaces | None = None
        self.ready = asyncio.Event()
        self._early: list[Callable[[], None]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopped = False
        self._stopping: asyncio.Task[None] | None = None
        self.parent_pid: int | None = None
        # How to stop reading input when the editor is gone; stdio replaces it.
        self.stop_reading: Callable[[], None] = self.shutdown
        self.features = [kind(self) for kind in features]
        feature.register(self, self.features)

    @property
    def exit_code(self) -> int:
        """The process's exit status for the session that ended (MplpProtocol.exit_code)."""
        protocol = self.protocol
        assert isinstance(protocol, MplpProtocol)
        return protocol.exit_code

    def watch_disk(self) -> None:
        """Watch every folder this server records itself, from now on."""
        self.watches_disk = True
        if self.workspaces is not None:
            self.workspaces.watch()

    def notify_client(self, method: str, params: Any) -> None:
        """Send one of the server's own notifications, if the client asked for it."""
        if method in self.client_notifications and not self.stopped:
            self.protocol.notify(method, params)

    def get_feature(self, kind: type[F]) -> F:
        return next(f for f in self.features if isinstance(f, kind))

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
        routed: Route | None = None,
    ) -> None:
        """``routed``: where :meth:`document` found ``uri`` just now (one route per save)."""
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
                routed=routed,
            )

    def watched(self, changes: Sequence[tuple[str, str]]) -> None:
        """A batch of (change, URI) the editor's file watcher reported, in its order: what
        :meth:`activity` does for each, routed at once (:meth:`Workspaces.observe_many`)."""
        if self.workspaces is None:
            for change, uri in changes:
                self.activity(change, uri, origin="watcher")
            return
        from mplp_lsp.sources.debounce import WATCHER, Change

        workspaces = self.workspaces
        files = [
            (Change(change), uri) for change, uri in changes if _is_file_uri(uri, None, workspaces)
        ]
        workspaces.observe_many(files, origin=WATCHER)

    def document(
        self,
        uri: str,
        action: Callable[[Any, str], None],
        refused: Callable[[PathRejected], None] | None = None,
    ) -> Route | None:
        """Run ``action(workspace, relative_path)`` for a document inside a workspace (one
        this server records, or one it follows: both keep the editor's documents), else
        ``refused`` (the refusal is counted when the document's activity is observed).
        The route found, if any."""
        if self.workspaces is None:
            if len(self._early) < _EARLY_LIMIT:

                def later() -> None:
                    self.document(uri, action, refused)

                self._early.append(later)
            return None
        from mplp_lsp.sanitize.paths import PathRejected

        try:
            workspace, path = routed = self.workspaces.route(uri)
        except PathRejected as rejected:
            if refused is not None:
                refused(rejected)
            return None
        action(workspace, path)
        return routed

    # --- engine life cycle ------------------------------------------------------------------

    async def start_engine(self) -> None:
        loop = asyncio.get_running_loop()
        if self._configure is not None:
            self.flags = await loop.run_in_executor(None, self._configure)
        # The engine's imports run off the loop: requests keep flowing.
        await loop.run_in_executor(None, _warm_up)
        from mplp_lsp.engine.workspaces import Workspaces
        from mplp_lsp.process.heap import keep_started_objects
        from mplp_lsp.process.switching import switch_quickly

        switch_quickly()
        workspaces = Workspaces(
            state_dir=self.state_dir,
            remote_url=self.remote_url,
            reconfigure=lambda root: self._settings_for(root.as_uri()),
            watch=self.watches_disk,
        )
        workspaces.on_promoted(self.recording)
        folders = self._folders()
        if not folders:
            self.tell(
                types.MessageType.Warning,
                "mplp-lsp records the files of workspace folders, and the editor started it "
                "with none (rootUri is null: a file opened outside any project or folder). "
                "Nothing is recorded; open the file's folder or project to record it.",
            )
        for root, folder_uri in folders:
            try:
                await self.add_folder(workspaces, root, folder_uri, self.heard_since_ns)
            except Exception as exc:
                log.exception("cannot open workspace %s", root)
                self._warn(f"mplp-lsp is not recording {root}: {exc}")
        self.workspaces = workspaces
        if self.watches_disk:
            workspaces.watch()  # the editor refused to watch while the folders opened
        keep_started_objects()
        early, self._early = self._early, []
        for replay in early:
            replay()
        self.ready.set()
        self.status_changed()

    async def add_folder(
        self,
        workspaces: Workspaces,
        root: Path,
        folder_uri: str | None,
        named_ns: int | None = None,
    ) -> None:
        """Record a folder; ``named_ns``: since when the server can hear of it (when the editor
        added it while the server ran; for a folder of ``initialize``, the process's start
        unless the client held activity since earlier)."""
        from mplp_lsp.engine.workspace import Workspace

        settings = await self._settings_for(folder_uri)
        workspace = await workspaces.add(root, settings, named_ns=named_ns)
        if isinstance(workspace, Workspace):
            # Ready once the graph knows what was there: a change from then on is judged
            # against it (what the editor reports meanwhile waits for it in any case).
            await workspace.files.learnt()
            await self.recording(workspace)
        else:  # following another editor's server: its status shows what it handed over
            workspace.on_commit(lambda _count: self.status_changed())

    async def recording(self, workspace: Workspace) -> None:
        """This server owns the workspace's store (from the start, or took it over)."""
        for each in self.features:
            await each.recording(workspace)
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
        if self.pulls_configuration:
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

    @property
    def pulls_configuration(self) -> bool:
        """The editor answers ``workspace/configuration`` (else settings come pushed)."""
        return _supports(self.client_capabilities, "workspace", "configuration")

    async def reload_settings(self) -> None:
        if self.workspaces is None:
            return
        for workspace in self.workspaces:
            workspace.apply_config(await self._settings_for(workspace.root.as_uri()))

    def _warn(self, message: str) -> None:
        self.tell(types.MessageType.Warning, message)

    def tell(self, kind: types.MessageType, message: str, *, show: bool = True) -> None:
        """A message for the user: logged, and shown by the editor (``show``) or put in its
        log of the server's messages."""
        log.log(logging.WARNING if kind <= types.MessageType.Warning else logging.INFO, message)
        if show:
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))
        else:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))

    async def stop_engine(self) -> None:
        """Commit what is pending and close every store. Every caller (``shutdown``, the end
        of input, a signal) waits for the one stop to finish: the process must not end
        while another caller's stop is still storing."""
        if self._stopping is None:
            self.stopped = True
            self._stopping = asyncio.get_running_loop().create_task(
                self._stop(), name="stop-engine"
            )
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        if self.apis is not None:
            await self.apis.close_all()
        if self.workspaces is not None:
            await self.workspaces.close()
        for task in list(self._tasks):
            task.cancel()

    def status_changed(self) -> None:
        for each in self.features:
            each.status_changed()

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
    # The whole engine; the validators are compiled at the first activity, not before
    # (intake.Intake.prepare): an idle daemon does not hold them.
    from mplp_lsp.engine.workspaces import Workspaces  # noqa: F401


def _supports(capabilities: Any, *path: str) -> bool:
    node = capabilities
    for name in path:
        node = getattr(node, name, None)
        if node is None:
            return False
    return bool(node)

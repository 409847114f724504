"""Drift in the editor: diagnostics, quick fixes, the drift commands and scan progress.

Diagnostics go one way per session: pulled (``textDocument/diagnostic`` and
``workspace/diagnostic``) when the client supports pull diagnostics *and* can be told to
refresh them, pushed (``textDocument/publishDiagnostics``) otherwise. Pushing covers files
that are not open, which is also what workspace diagnostics give pull clients; a pushed
diagnostic is sent again when its file is opened, for clients that keep only those of open
files. A finding that goes away (resolved, file deleted, now ignored) clears its diagnostic
at once.

The engine is imported only when used: this module is loaded before ``initialized``.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from mplp_lsp.lsp.feature import Feature, command, handles
from mplp_lsp.lsp.server import MplpLanguageServer

if TYPE_CHECKING:
    from mplp_lsp.drift import Drift
    from mplp_lsp.engine.workspace import Workspace

log = logging.getLogger(__name__)

SOURCE = "mplp"
CODE = "drift"
SCAN_COMMAND = "mplp.scanDrift"
_PROGRESS_FROM = 10_000  # files: smaller scans finish before a progress bar would show
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}
_START = types.Position(line=0, character=0)
_tokens = itertools.count(1)


class DriftFeature(Feature[MplpLanguageServer]):
    def __init__(self, server: MplpLanguageServer) -> None:
        super().__init__(server)
        self._progress: dict[int, str] = {}  # id(workspace) -> its scan's progress token

    # --- mode ------------------------------------------------------------------------------

    @property
    def pull(self) -> bool:
        caps = self.server.client_capabilities
        pull = caps.text_document is not None and caps.text_document.diagnostic is not None
        refresh = (
            caps.workspace is not None
            and caps.workspace.diagnostics is not None
            and bool(caps.workspace.diagnostics.refresh_support)
        )
        return pull and refresh

    # --- engine side ---------------------------------------------------------------------

    async def recording(self, workspace: Workspace) -> None:
        workspace.drift.on_change(lambda changes: self._changed(workspace, changes))
        workspace.drift.on_progress(lambda done, total: self._scan_progress(workspace, done, total))
        if workspace.drift.drifts:  # found before the editor side was listening
            self._changed(workspace, dict(workspace.drift.drifts))

    def _changed(self, workspace: Workspace, changes: dict[str, Drift | None]) -> None:
        self.server.status_changed()
        if self.pull:
            self.server.workspace_diagnostic_refresh(None)
            return
        for path, drift in changes.items():
            self.server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(
                    uri=(workspace.root / path).as_uri(),
                    diagnostics=self._diagnostics(workspace, drift),
                )
            )

    def opened(self, uri: str) -> None:
        """The editor opened a document: send its diagnostic again. Clients may drop what
        was pushed for files they did not have open (eglot does), and a pull client asks by
        itself."""
        found = None if self.pull else locate(self.server, uri)
        if found is None:
            return
        workspace, path = found
        drift = workspace.drift.drifts.get(path)
        if drift is not None and drift.state == "open":
            self.server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(
                    uri=uri, diagnostics=self._diagnostics(workspace, drift)
                )
            )

    def _diagnostics(self, workspace: Workspace, drift: Drift | None) -> list[types.Diagnostic]:
        if drift is None or drift.state != "open":
            return []
        return [
            types.Diagnostic(
                range=types.Range(start=_START, end=_START),
                message=drift.message(),
                severity=_SEVERITY[workspace.settings.drift_severity],
                source=SOURCE,
                code=CODE,
                data={"path": drift.path, "reason": str(drift.reason)},
            )
        ]

    def _scan_progress(self, workspace: Workspace, done: int, total: int) -> None:
        """Work-done progress for scans big enough to take a moment."""
        caps = self.server.client_capabilities
        if total < _PROGRESS_FROM or not (caps.window and caps.window.work_done_progress):
            return
        key = id(workspace)
        progress = self.server.work_done_progress
        token = self._progress.get(key)
        if done >= total:
            if token is not None:
                del self._progress[key]
                progress.end(token, types.WorkDoneProgressEnd(message="drift scan done"))
            return
        percentage = done * 100 // total
        if token is None:
            token = f"mplp-drift-{next(_tokens)}"
            self._progress[key] = token

            def begin(*_args: Any) -> None:
                progress.begin(
                    token,
                    types.WorkDoneProgressBegin(
                        title="mplp: drift scan", cancellable=True, percentage=percentage
                    ),
                )
                progress.tokens[token].add_done_callback(
                    lambda future: workspace.drift.cancel_scan() if future.cancelled() else None
                )

            progress.create(token, begin)
            return
        if token in progress.tokens:
            progress.report(
                token,
                types.WorkDoneProgressReport(
                    message=f"{done:,} of {total:,}", percentage=percentage
                ),
            )

    # --- requests --------------------------------------------------------------------------

    @handles(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(
            identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=True
        ),
    )
    def document_diagnostics(
        self, params: types.DocumentDiagnosticParams
    ) -> types.RelatedFullDocumentDiagnosticReport:
        items: list[types.Diagnostic] = []
        found = locate(self.server, params.text_document.uri)
        if found is not None and self.pull:
            workspace, path = found
            items = self._diagnostics(workspace, workspace.drift.drifts.get(path))
        return types.RelatedFullDocumentDiagnosticReport(items=items)

    @handles(types.WORKSPACE_DIAGNOSTIC)
    def workspace_diagnostics(
        self, _params: types.WorkspaceDiagnosticParams
    ) -> types.WorkspaceDiagnosticReport:
        reports: list[types.WorkspaceDocumentDiagnosticReport] = []
        if self.pull and self.server.workspaces is not None:
            for workspace in self.server.workspaces:
                for path, drift in sorted(workspace.drift.open_drifts.items()):
                    reports.append(
                        types.WorkspaceFullDocumentDiagnosticReport(
                            uri=(workspace.root / path).as_uri(),
                            items=self._diagnostics(workspace, drift),
                            version=None,
                        )
                    )
        return types.WorkspaceDiagnosticReport(items=reports)

    def saved(self, workspace: Workspace, path: str) -> None:
        """A save may leave a drifted file as the graph records it (a restore the editor
        applied), which no event reports: look at it again (``path``: where the saved
        document lies in ``workspace``, which the editor's save was routed to)."""
        if path in workspace.drift.drifts:
            self.server.spawn(workspace.drift.recheck([path]), "drift-recheck")

    @command(SCAN_COMMAND)
    async def scan(self, *_args: Any) -> list[dict[str, Any]]:
        await self.server.ready.wait()
        out = []
        for workspace in self.server.workspaces or ():
            summary = await workspace.drift.scan()
            out.append({"root": str(workspace.root), **summary.to_json()})
        return out


def locate(server: MplpLanguageServer, uri: str) -> tuple[Workspace, str] | None:
    """The owned workspace of a file URI and its path there; a deleted file (which cannot be
    resolved through the file system) is mapped lexically."""
    workspaces = server.workspaces
    if workspaces is None:
        return None
    from mplp_lsp.sanitize.paths import PathRejected

    try:
        return workspaces.locate(uri)
    except PathRejected:
        path = to_fs_path(uri)
        for workspace in workspaces:
            if path and Path(path).is_relative_to(workspace.root):
                return workspace, Path(path).relative_to(workspace.root).as_posix()
        return None

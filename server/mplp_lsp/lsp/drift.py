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

if TYPE_CHECKING:
    from mplp_lsp.lsp.server import MplpLanguageServer
    from mplp_lsp.runtime.drift import Drift
    from mplp_lsp.workspace import Workspace

log = logging.getLogger(__name__)

SOURCE = "mplp"
CODE = "drift"
RESOLVE_COMMAND = "mplp.resolveDrift"
SCAN_COMMAND = "mplp.scanDrift"
_PROGRESS_FROM = 10_000  # files: smaller scans finish before a progress bar would show
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}
_TITLES = (
    ("fs", "Drift: file system wins (update the project graph)"),
    ("psg", "Drift: PSG wins (restore the recorded content)"),
    ("merge", "Drift: three-way merge"),
    ("ignore", "Drift: decide later"),
)
_START = types.Position(line=0, character=0)
_tokens = itertools.count(1)


class DriftFeature(Feature):
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
        found = None if self.pull else self._locate(uri)
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

    def _locate(self, uri: str) -> tuple[Workspace, str] | None:
        workspaces = self.server.workspaces
        if workspaces is None:
            return None
        from mplp_lsp.sanitize.paths import PathRejected

        try:
            return workspaces.locate(uri)
        except PathRejected:
            # A deleted file cannot be resolved through the file system: map it lexically.
            path = to_fs_path(uri)
            for workspace in workspaces:
                if path and Path(path).is_relative_to(workspace.root):
                    return workspace, Path(path).relative_to(workspace.root).as_posix()
            return None

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
        found = self._locate(params.text_document.uri)
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

    @handles(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        found = self._locate(params.text_document.uri)
        if found is None:
            return []
        workspace, path = found
        drift = workspace.drift.open_drifts.get(path)
        if drift is None:
            return []
        ours = [d for d in params.context.diagnostics if d.source == SOURCE and d.code == CODE]
        uri = params.text_document.uri
        return [
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=ours or None,
                is_preferred=strategy == "fs",
                command=types.Command(
                    title=title, command=RESOLVE_COMMAND, arguments=[uri, strategy]
                ),
            )
            for strategy, title in _TITLES
        ]

    @command(RESOLVE_COMMAND)
    async def resolve(self, *args: Any) -> dict[str, Any]:
        from mplp_lsp.runtime.drift import Strategy

        uri, strategy = [*args, None, None][:2]
        if not isinstance(uri, str) or strategy not in {s.value for s in Strategy}:
            raise ValueError(
                f"{RESOLVE_COMMAND} takes a file URI and one of fs, psg, merge, ignore"
            )
        await self.server.ready.wait()
        found = self._locate(uri)
        if found is None:
            raise ValueError(f"{uri} is not in a workspace")
        workspace, path = found
        result = await workspace.drift.resolve(path, Strategy(strategy))
        if not result.ok:
            self.server.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=result.message)
            )
        return result.to_json()

    @command(SCAN_COMMAND)
    async def scan(self, *_args: Any) -> list[dict[str, Any]]:
        await self.server.ready.wait()
        out = []
        for workspace in self.server.workspaces or ():
            summary = await workspace.drift.scan()
            out.append({"root": str(workspace.root), **summary.to_json()})
        return out

"""The editor's documents: open, close, will-save and save.

A document's text is kept by the workspace it belongs to (what drift compares against); a
save is also file activity, whose quiet period starts at ``willSave``. Its language is the
client's ``languageId`` while the client labels documents one by one (lsp/languages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.uris import to_fs_path

from mplp_lsp.lsp.drift import DriftFeature
from mplp_lsp.lsp.feature import Feature, handles
from mplp_lsp.lsp.languages import ClientLanguages
from mplp_lsp.lsp.server import MplpLanguageServer

if TYPE_CHECKING:
    from mplp_lsp.sanitize.paths import PathRejected


class DocumentsFeature(Feature[MplpLanguageServer]):
    def __init__(self, server: MplpLanguageServer) -> None:
        super().__init__(server)
        self.languages = ClientLanguages()
        self._told: set[str] = set()  # documents outside every folder, the user was told of

    @handles(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        if self.languages.seen(item.language_id, unquote(item.uri)):
            self._forget_languages()

        def opened(workspace: Any, path: str) -> None:
            language = self.languages.language(item.language_id)
            workspace.documents.opened(path, language, item.text)
            self.server.get_feature(DriftFeature).opened(item.uri)

        self.server.document(item.uri, opened, lambda why: self._outside(item.uri, why))

    def _outside(self, uri: str, rejected: PathRejected) -> None:
        """Tell the user why a document they opened is not recorded: once shown, then logged
        (once per file)."""
        from mplp_lsp.protocol.result import ErrorCode

        workspaces = self.server.workspaces
        assert workspaces is not None  # documents are routed once the engine is ready
        roots = [str(r) for r in (*workspaces.roots, *(f.root for f in workspaces.followers))]
        if rejected.code is not ErrorCode.PATH_OUTSIDE_WORKSPACE or not roots or uri in self._told:
            return  # without any folder, the start-up message said why
        path = to_fs_path(uri) or uri
        self.server.tell(
            types.MessageType.Info,
            f"mplp-lsp does not record {path}: it is outside the folders it records "
            f"({', '.join(roots)}). Open its folder or project in the editor to record it.",
            show=not self._told,
        )
        self._told.add(uri)

    def _forget_languages(self) -> None:
        workspaces = self.server.workspaces
        if workspaces is not None:
            for each in (*workspaces, *workspaces.followers):
                each.documents.forget_languages()

    @handles(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self.server.document(params.text_document.uri, lambda ws, path: ws.documents.closed(path))

    @handles(types.TEXT_DOCUMENT_WILL_SAVE)
    def will_save(self, params: types.WillSaveTextDocumentParams) -> None:
        from mplp_lsp.sources.debounce import WILL_SAVE

        # The save's quiet period starts here; the didSave that follows completes it.
        self.server.activity("modified", params.text_document.uri, origin=WILL_SAVE)

    @handles(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(self, params: types.DidSaveTextDocumentParams) -> None:
        server = self.server
        uri = params.text_document.uri
        document = server.workspace.text_documents.get(unquote(uri))
        text = params.text if params.text is not None else (document.source if document else None)

        def saved(workspace: Any, path: str) -> None:
            from mplp_lsp.engine.workspace import Workspace  # routed: the engine is loaded

            workspace.documents.saved(path, text)
            if isinstance(workspace, Workspace):  # a followed folder's drift is its owner's
                server.get_feature(DriftFeature).saved(workspace, path)

        routed = server.document(uri, saved)
        language = self.languages.language(document.language_id) if document else None
        server.activity("modified", uri, language=language, routed=routed)

"""The editor's documents: open, close, will-save and save.

A document's text is kept by the workspace it belongs to (what drift compares against); a
save is also file activity, whose quiet period starts at ``willSave``."""

from __future__ import annotations

from lsprotocol import types

from mplp_lsp.lsp.feature import Feature, handles


class DocumentsFeature(Feature):
    @handles(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        self.server.document(
            item.uri, lambda ws, path: ws.documents.opened(path, item.language_id, item.text)
        )

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
        document = server.workspace.text_documents.get(uri)
        text = params.text if params.text is not None else (document.source if document else None)
        server.document(uri, lambda ws, path: ws.documents.saved(path, text))
        server.activity("modified", uri, language=document.language_id if document else None)

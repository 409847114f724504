"""The JSON-RPC protocol of the server: pygls's, plus an answer to every malformed message,
and quiet about what clients send in the ordinary course of things.

pygls turns params that do not fit a request's LSP type into ``JsonRpcInvalidParams`` while
parsing, logs it and drops the message, so the editor waits forever for that request's
answer. JSON-RPC 2.0 says such a request gets an error response; this sends it. A message
whose ``method`` is not a string (a client bug seen with a symbol it could not name) is an
invalid request: answered with that code, never handed to pygls, which would fail on it.

JSON-RPC also lets a request or notification leave ``params`` out (vscode-jsonrpc does, for a
request sent without parameters); pygls's message types of the methods it does not know
require the field, so it is filled in with null.

Two things clients do routinely are not errors: a ``$/cancelRequest`` for a request already
answered (lsp-mode cancels on every keystroke), and a ``didChange`` for a document the server
was never sent (a client that could not encode a binary buffer's ``didOpen``). pygls logs the
first as a warning and fails with ``KeyError`` on the second; both are left at debug level.
"""

from __future__ import annotations

import logging
from typing import Any, Final
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)


class _Answered:
    """What :meth:`MplpProtocol.structure_message` gives for a message it has dealt with."""


ANSWERED: Final = _Answered()


class MplpProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" in data and "method" in data and not isinstance(data["method"], str):
            log.warning("refused a message whose method is %s", type(data["method"]).__name__)
            self._answer_error(data, JsonRpcInvalidRequest(message="the method is not a string"))
            return ANSWERED
        if "method" in data and "params" not in data:
            data = {**data, "params": None}
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            self._answer_error(data, error)
            raise

    def _answer_error(self, data: dict[str, Any], error: JsonRpcException) -> None:
        ident = data.get("id")
        is_request = "method" in data and "error" not in data and "result" not in data
        if is_request and isinstance(ident, int | str) and not isinstance(ident, bool):
            self._send_response(ident, error=error.to_response_error())

    def handle_message(self, message: Any) -> None:
        if message is ANSWERED:
            return
        if not hasattr(message, "jsonrpc"):
            # A JSON-RPC batch (an array) or a bare value: LSP has neither, and the base class
            # would read .jsonrpc off it and log a traceback.
            log.warning(
                "refused a message that is a JSON %s, not an object", type(message).__name__
            )
            return
        super().handle_message(message)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        future = self._request_futures.pop(msg_id, None)
        if future is None:
            log.debug("cancel for %r, which is not running (answered already)", msg_id)
            return
        future.cancel()

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        if unquote(params.text_document.uri) not in self.workspace.text_documents:
            log.debug("didChange for a document never opened: %s", params.text_document.uri)
            return
        yield from super().lsp_text_document__did_change(params)

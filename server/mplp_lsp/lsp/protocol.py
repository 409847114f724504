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

import contextvars
import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, overload
from urllib.parse import unquote

import attrs
from lsprotocol import types
from lsprotocol.types import ResponseError
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

if TYPE_CHECKING:
    from mplp_lsp.lsp.handshake import EarlyStart

log = logging.getLogger(__name__)


class _Answered:
    """What :meth:`MplpProtocol.structure_message` gives for a message it has dealt with."""


ANSWERED: Final = _Answered()


class MplpProtocol(LanguageServerProtocol):
    # The input read before the server was loaded, and whether its initialize was answered.
    early: EarlyStart | None = None
    # Ends the message loop (stdio sets it); None: pygls's transport, which exits itself.
    end_session: Callable[[], None] | None = None
    # The process's exit status once ``exit`` came: LSP asks for 1 unless a ``shutdown`` was
    # received before it (answered or not: eglot sends ``exit`` 1.5 s after ``shutdown``).
    exit_code = 0
    _shutdown_received = False

    def _send_response(
        self, msg_id: Any, result: Any = None, error: ResponseError | None = None
    ) -> None:
        early = self.early
        if early is not None and msg_id == early.request_id:
            self.early = None
            if error is None:
                found = json.loads(json.dumps(result, default=self._serialize_message))
                if early.settle(found):
                    return
            elif early.sent is not None:
                early.refused(error.message)
                return
        super()._send_response(msg_id, result, error)

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" in data and "method" in data and not isinstance(data["method"], str):
            log.warning("refused a message whose method is %s", type(data["method"]).__name__)
            self._answer_error(data, JsonRpcInvalidRequest(message="the method is not a string"))
            return ANSWERED
        if "method" in data and "params" not in data:
            data = {**data, "params": None}
        if (watched := _watched_files(data)) is not None:
            return watched
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
        # pygls tells a message's kind by asking typing's runtime protocols, which on Python
        # 3.11 costs about a sixth of a didSave's CPU; a notification's class says it. After
        # shutdown, and for anything else, pygls decides (it refuses all but exit).
        notification = _NOTIFICATION_CLASSES.get(kind := type(message))
        if notification is None:
            notification = _NOTIFICATION_CLASSES[kind] = is_notification(kind)
        if notification and message.jsonrpc == self.VERSION and not self._shutdown:
            context = contextvars.copy_context()
            context.run(self._handle_notification, message.method, message.params)
            return
        super().handle_message(message)

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Any:
        """``exit`` ends the message loop the way the end of input does (the stop in progress,
        a ``shutdown``'s, is awaited and completes). pygls raises ``SystemExit`` from a
        callback instead: with a ``shutdown`` still storing (eglot sends ``exit`` 1.5 s after
        ``shutdown`` whether answered or not) asyncio then cancelled that stop and logged a
        traceback into the editor's log."""
        self.exit_code = 0 if self._shutdown_received else 1
        if self.end_session is None:  # TCP: pygls's own loop
            yield from super().lsp_exit(*args)
            return
        if (user_handler := self.fm.features.get(types.EXIT)) is not None:
            yield user_handler, args, None
        self.end_session()

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        self._shutdown_received = True
        yield from super().lsp_shutdown(*args)

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


_NOTIFICATION_CLASSES: dict[type, bool] = {}


def is_notification(kind: type) -> bool:
    """Whether messages of this class are notifications as pygls tells them (a method,
    ``jsonrpc`` and params, no id); a class that is not an attrs class is left to pygls."""
    if not attrs.has(kind):
        return False
    names = {field.name for field in attrs.fields(kind)}
    return {"method", "jsonrpc", "params"} <= names and "id" not in names


def _watched_files(data: dict[str, Any]) -> types.DidChangeWatchedFilesNotification | None:
    """A watched-files notification whose changes are all plain ``{uri, type}`` objects,
    with :class:`FileEvents` for its changes; None for any other message (pygls structures
    it, and refuses it as before). pygls's converter made 20,000 changes into objects at
    once, holding the event loop for 60-130 ms before the handler, which yields between
    slices, could run."""
    if data.get("method") != types.WORKSPACE_DID_CHANGE_WATCHED_FILES or set(data) != {
        "jsonrpc",
        "method",
        "params",
    }:
        return None
    params = data["params"]
    changes = params.get("changes") if type(params) is dict and len(params) == 1 else None
    if data["jsonrpc"] != "2.0" or type(changes) is not list:
        return None
    if not all(map(_plain_change, changes)):
        return None
    return types.DidChangeWatchedFilesNotification(
        params=types.DidChangeWatchedFilesParams(changes=FileEvents(changes))
    )


_CHANGE_TYPES: Final = {kind.value: kind for kind in types.FileChangeType}


def _plain_change(change: object) -> bool:
    return (
        type(change) is dict
        and len(change) == 2
        and type(change.get("uri")) is str
        and type(change.get("type")) is int
        and change["type"] in _CHANGE_TYPES
    )


class FileEvents(Sequence[types.FileEvent]):
    """Checked ``{uri, type}`` changes, each a :class:`~lsprotocol.types.FileEvent` when read."""

    __slots__ = ("_changes",)

    def __init__(self, changes: list[dict[str, Any]]) -> None:
        self._changes = changes

    def __len__(self) -> int:
        return len(self._changes)

    @overload
    def __getitem__(self, index: int) -> types.FileEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[types.FileEvent]: ...
    def __getitem__(self, index: int | slice) -> types.FileEvent | Sequence[types.FileEvent]:
        if isinstance(index, slice):
            return FileEvents(self._changes[index])
        change = self._changes[index]
        return types.FileEvent(uri=change["uri"], type=_CHANGE_TYPES[change["type"]])

"""The JSON-RPC protocol of the server: pygls's, plus an answer to every malformed request.

pygls turns params that do not fit a request's LSP type into ``JsonRpcInvalidParams`` while
parsing, logs it and drops the message, so the editor waits forever for that request's
answer. JSON-RPC 2.0 says such a request gets an error response; this sends it.

JSON-RPC also lets a request or notification leave ``params`` out (vscode-jsonrpc does, for a
request sent without parameters); pygls's message types of the methods it does not know
require the field, so it is filled in with null.
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol


class MplpProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        if "method" in data and "params" not in data:
            data = {**data, "params": None}
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            ident = data.get("id")
            is_request = "method" in data and "error" not in data and "result" not in data
            if is_request and isinstance(ident, int | str) and not isinstance(ident, bool):
                self._send_response(ident, error=error.to_response_error())
            raise

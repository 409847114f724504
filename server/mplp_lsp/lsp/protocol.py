"""The JSON-RPC protocol of the server: pygls's, plus an answer to every malformed request.

pygls turns params that do not fit a request's LSP type into ``JsonRpcInvalidParams`` while
parsing, logs it and drops the message, so the editor waits forever for that request's
answer. JSON-RPC 2.0 says such a request gets an error response; this sends it.
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol


class MplpProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            ident = data.get("id")
            is_request = "method" in data and "error" not in data and "result" not in data
            if is_request and isinstance(ident, int | str) and not isinstance(ident, bool):
                self._send_response(ident, error=error.to_response_error())
            raise

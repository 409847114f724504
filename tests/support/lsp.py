"""An in-process language server fed raw JSON-RPC, and what it answered."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from typing import Any

from pygls.io_ import run_async

from mplp_lsp.lsp.server import MplpLanguageServer


class _Reader:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        data = b""
        for message in messages:
            body = json.dumps(message).encode()
            data += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        self._stream = io.BytesIO(data)

    async def readline(self) -> bytes:
        return self._stream.readline()

    async def readexactly(self, n: int) -> bytes:
        return self._stream.read(n)


class _Writer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.sent.append(json.loads(data.split(b"\r\n\r\n", 1)[1]))

    def close(self) -> None:
        pass


async def exchange(
    server: MplpLanguageServer, messages: list[dict[str, Any]], answers: int
) -> list[dict[str, Any]]:
    """Run ``messages`` through pygls' loop; the first ``answers`` messages sent back."""
    writer = _Writer()
    server.protocol.set_writer(writer)
    await run_async(
        stop_event=threading.Event(),
        reader=_Reader(messages),
        protocol=server.protocol,
        error_handler=server.report_server_error,
    )
    for _ in range(500):  # async handlers finish after the input ends
        if len(writer.sent) >= answers:
            break
        await asyncio.sleep(0.01)
    return writer.sent


def request(ident: int, method: str, params: Any = None, *, with_params: bool = True) -> Any:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if with_params:
        message["params"] = params
    return message


INITIALIZE = request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})

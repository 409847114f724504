"""The peer for bench_lsp.py: the smallest useful pygls server (counts didSave, answers a ping)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("minimal", "1")
saves = 0


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(_params: types.DidSaveTextDocumentParams) -> None:
    global saves
    saves += 1


@server.feature("bench/stats")
def stats(_params: Any) -> dict[str, int]:
    return {"saves": saves}


if __name__ == "__main__":
    server.start_io()

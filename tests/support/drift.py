"""A workspace with committed history, edited behind the editor's back, and the drift the server reports."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types

from tests.e2e.harness import Session, lsp_session, read_events

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def commit(workspace: Path, path: str, text: str) -> None:
    (workspace / path).parent.mkdir(parents=True, exist_ok=True)
    (workspace / path).write_text(text)
    for args in (["add", path], ["commit", "-qm", path]):
        subprocess.run(["git", "-C", str(workspace), *args], check=True, env=GIT_ENV)


async def record(workspace: Path, state_dir: Path, files: dict[str, str]) -> None:
    """A first daemon session records the files in the PSG, then stops."""
    async with lsp_session(workspace, state_dir) as session:
        for path, text in files.items():
            session.save(path, text)
        await session.wait_for_events(len(files), settle=0.3)
        await wait_for_nodes(state_dir, len(files))


async def wait_for_nodes(state_dir: Path, count: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(read_events(state_dir, "graph_update")) >= count:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the PSG did not record the files")


async def wait_for_diagnostics(
    session: Session, path: str, *, present: bool, timeout: float = 20.0
) -> Sequence[types.Diagnostic]:
    uri = session.uri(path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = session.client.diagnostics.get(uri)
        if found is not None and bool(found) == present:
            return found
        await asyncio.sleep(0.05)
    raise TimeoutError(f"diagnostics of {path} never became {'set' if present else 'empty'}")


async def quick_fixes(
    session: Session, path: str, diagnostics: Sequence[types.Diagnostic]
) -> list[dict[str, Any]]:
    """The raw JSON answer: the client's converter cannot tell a CodeAction from a Command,
    so the message is read before it is converted."""
    protocol = session.client.protocol
    raw: list[dict[str, Any]] = []
    convert = protocol.structure_message

    def spy(data: dict[str, Any]) -> Any:
        if "result" in data:
            raw.append(data)
        return convert(data)

    protocol.structure_message = spy  # type: ignore[method-assign]
    try:
        await session.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=session.uri(path)),
                range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
                context=types.CodeActionContext(diagnostics=list(diagnostics)),
            )
        )
    finally:
        protocol.structure_message = convert  # type: ignore[method-assign]
    result = raw[-1]["result"]
    assert isinstance(result, list)
    return result

"""The server watches its folders itself when the editor does not (real server, real inotify).

An editor without the LSP 3.17 file watcher (eglot, lsp-mode, Helix, ...) reports saves only,
or watches part of the tree; a rename outside the editor, or a directory made while it runs,
would go unrecorded until the next start. The server then runs the watcher of ``mplp-lsp
watch`` on each folder it records, and does not ask the editor to watch.
"""

from __future__ import annotations

import os
from pathlib import Path

from lsprotocol import types
from pytest_lsp import client_capabilities

from tests.e2e.harness import editor_capabilities, lsp_session


def payloads(events: list[dict[str, object]]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for event in events:
        payload = event["payload"]
        assert isinstance(payload, dict)
        out.append((payload["file_path"], payload["change_type"], payload.get("previous_path")))
    return out


async def test_without_an_editor_watcher_the_server_watches(
    workspace: Path, state_dir: Path
) -> None:
    (workspace / "old.txt").write_text("before the editor\n")
    for n in range(3000):  # enough directories that placing their watches takes a while
        (workspace / "tree" / f"d{n // 100}" / f"e{n}").mkdir(parents=True)
    old_watcher = client_capabilities("neovim")  # dynamicRegistration false, as Neovim's default
    async with lsp_session(workspace, state_dir, capabilities=old_watcher) as session:
        os.rename(workspace / "old.txt", workspace / "new.txt")
        (workspace / "made" / "deep").mkdir(parents=True)
        (workspace / "made" / "deep" / "x.py").write_text("x = 1\n")
        events = await session.wait_for_events(2)
    assert not [r for r in session.registrations if r.method == "workspace/didChangeWatchedFiles"]
    assert sorted(payloads(events), key=str) == sorted(
        [("made/deep/x.py", "created", None), ("new.txt", "renamed", "old.txt")], key=str
    )


async def test_an_editor_with_a_watcher_is_asked_to_watch_and_the_server_does_not(
    workspace: Path, state_dir: Path
) -> None:
    async with lsp_session(
        workspace, state_dir, capabilities=editor_capabilities("visual-studio-code")
    ) as session:
        (workspace / "src" / "unreported.py").write_text("x\n")  # its watcher missed it
        events = await session.wait_for_events(1, timeout=2.0)
    assert [r.method for r in session.registrations] == [types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
    assert events == []


async def test_the_server_watcher_stops_with_its_folder(workspace: Path, state_dir: Path) -> None:
    other = workspace.parent / "second"
    other.mkdir()
    async with lsp_session(
        workspace, state_dir, folders=[workspace, other], capabilities=client_capabilities("neovim")
    ) as session:
        session.client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[],
                    removed=[types.WorkspaceFolder(uri=other.as_uri(), name=other.name)],
                )
            )
        )
        await session.wait_for_events(1, timeout=1.0)
        (other / "after.txt").write_text("not recorded any more\n")
        (workspace / "kept.txt").write_text("recorded\n")
        events = await session.wait_for_events(1)
        status = await session.status()
    assert payloads(events) == [("kept.txt", "created", None)]
    assert status["refused"] == 0  # the removed folder's watcher reported nothing after it

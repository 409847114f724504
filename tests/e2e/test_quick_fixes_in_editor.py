"""Quick fixes that rewrite a file the editor has open go through the editor (real server).

The action carries a WorkspaceEdit for the buffer (with the list, or when the client resolves
the action), or the command sends ``workspace/applyEdit``; the disk changes only when the
editor saves, and then the resolution is recorded. A file no editor has open is written by
the server, as before (tests/e2e/test_drift.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import converters, types
from pytest_lsp import LanguageClient

from tests.e2e.harness import Session, editor_capabilities, lsp_session, plain, read_events
from tests.support.drift import commit, quick_fixes, record, wait_for_diagnostics

_CONVERTER = converters.get_converter()

RECORDED = "line 1\nline 2 recorded\nline 3\n"
ON_DISK = "line 1\nline 2 on disk\nline 3\n"


def resolutions(state_dir: Path) -> list[str]:
    return [
        e["payload"]["strategy"]
        for e in read_events(state_dir, "graph_update")
        if e["event_type"] == "file_drift_resolved"
    ]


async def drifted(workspace: Path, state_dir: Path) -> None:
    commit(workspace, "src/f.txt", "line 1\nline 2\nline 3\n")
    await record(workspace, state_dir, {"src/f.txt": RECORDED})
    (workspace / "src/f.txt").write_text(ON_DISK)


async def actions(session: Session, path: str) -> list[types.CodeAction]:
    raw = await quick_fixes(session, path, [])
    return [_CONVERTER.structure(action, types.CodeAction) for action in raw]


def applied_text(edit: types.WorkspaceEdit, before: str) -> str:
    """What an editor's buffer holds after the edit (one edit replacing the whole text)."""
    [change] = edit.document_changes or []
    assert isinstance(change, types.TextDocumentEdit)
    [text_edit] = change.edits
    assert not isinstance(text_edit, types.SnippetTextEdit)  # plain text, no snippet syntax
    assert text_edit.range.start == types.Position(0, 0)
    assert text_edit.range.end == types.Position(len(before.splitlines()), 0)
    return text_edit.new_text


async def save_as_the_editor(session: Session, path: str, text: str) -> None:
    session.edit(path, text)
    session.save(path, text)


def without_resolve() -> types.ClientCapabilities:
    """A client that applies an action's edit but cannot resolve one (eglot 1.9)."""
    capabilities = editor_capabilities("visual-studio-code")
    assert capabilities.text_document and capabilities.text_document.code_action
    capabilities.text_document.code_action.resolve_support = None
    return capabilities


async def test_psg_wins_is_an_edit_of_the_buffer_and_the_save_completes_it(
    workspace: Path, state_dir: Path
) -> None:
    await drifted(workspace, state_dir)
    async with lsp_session(workspace, state_dir, capabilities=without_resolve()) as session:
        await wait_for_diagnostics(session, "src/f.txt", present=True)
        session.open("src/f.txt", ON_DISK, "plaintext")
        [psg] = [a for a in await actions(session, "src/f.txt") if "PSG wins" in a.title]
        assert psg.edit is not None and psg.command is not None
        assert applied_text(psg.edit, ON_DISK) == RECORDED
        assert (workspace / "src/f.txt").read_text() == ON_DISK  # the disk is the editor's
        answer = plain(await session.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=psg.command.command, arguments=psg.command.arguments)
        ))  # fmt: skip
        assert answer["ok"] and "save" in answer["message"]
        assert resolutions(state_dir) == []  # not before the save
        await save_as_the_editor(session, "src/f.txt", RECORDED)
        await wait_for_diagnostics(session, "src/f.txt", present=False)
        await session.wait_for_events(1, kind="graph_update", settle=0.5)
    assert resolutions(state_dir) == ["psg"]
    # the save restored the recorded content: not an edit of the file
    assert [e["payload"]["file_path"] for e in read_events(state_dir, "file_update")] == [
        "src/f.txt"
    ]


async def test_a_client_that_resolves_actions_gets_the_edit_when_it_chooses(
    workspace: Path, state_dir: Path
) -> None:
    await drifted(workspace, state_dir)
    async with lsp_session(workspace, state_dir) as session:  # VS Code resolves edits
        await wait_for_diagnostics(session, "src/f.txt", present=True)
        session.open("src/f.txt", ON_DISK, "plaintext")
        found = await actions(session, "src/f.txt")
        [merge] = [a for a in found if "merge" in a.title]
        assert merge.edit is None and merge.data is not None
        assert all(a.edit is None for a in found)
        resolved = await session.client.code_action_resolve_async(merge)
        assert resolved.edit is not None
        merged = applied_text(resolved.edit, ON_DISK)
        assert "<<<<<<<" in merged and "line 2 recorded" in merged and "line 2 on disk" in merged
        assert resolved.command is not None
        answer = plain(await session.client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command=resolved.command.command, arguments=resolved.command.arguments
            )
        ))  # fmt: skip
        assert not answer["ok"] and answer["conflicts"] == 1
        [diagnostic] = await wait_for_diagnostics(session, "src/f.txt", present=True)
        assert "conflict(s) marked in the editor" in diagnostic.message
        await save_as_the_editor(session, "src/f.txt", merged)
        await wait_for_diagnostics(session, "src/f.txt", present=False)
        await session.wait_for_events(3, kind="graph_update", settle=0.5)
    assert resolutions(state_dir) == ["merge"]
    assert (workspace / "src/f.txt").read_text() == merged


async def test_the_command_sends_the_edit_to_the_editor(workspace: Path, state_dir: Path) -> None:
    await drifted(workspace, state_dir)
    received: list[types.ApplyWorkspaceEditParams] = []

    def on_client(client: LanguageClient) -> None:
        @client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
            received.append(params)
            return types.ApplyWorkspaceEditResult(applied=True)

    async with lsp_session(workspace, state_dir, on_client=on_client) as session:
        await wait_for_diagnostics(session, "src/f.txt", present=True)
        session.open("src/f.txt", ON_DISK, "plaintext")
        answer: dict[str, Any] = plain(await session.client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="mplp.resolveDrift", arguments=[session.uri("src/f.txt"), "psg"]
            )
        ))  # fmt: skip
        [params] = received
        assert answer["ok"]
        assert applied_text(params.edit, ON_DISK) == RECORDED
        assert params.label == "Drift: PSG wins (restore the recorded content)"
    assert (workspace / "src/f.txt").read_text() == ON_DISK  # the editor did not save

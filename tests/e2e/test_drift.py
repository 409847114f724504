"""End to end: drift found by a real daemon, shown as diagnostics, fixed by quick fixes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import client_capabilities

from tests.e2e.harness import Session, lsp_session, plain, read_events
from tests.support.drift import commit, quick_fixes, record, wait_for_diagnostics

BASE = "".join(f"line {i}\n" for i in range(1, 11))


async def resolve(session: Session, path: str, strategy: str) -> dict[str, Any]:
    result = await session.client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="mplp.resolveDrift", arguments=[session.uri(path), strategy]
        )
    )
    answer = plain(result)
    assert isinstance(answer, dict)
    return answer


async def test_drift_after_restart_then_file_system_wins(workspace: Path, state_dir: Path) -> None:
    await record(workspace, state_dir, {"src/a.py": "x = 1\n"})
    (workspace / "src/a.py").write_text("x = 2  # changed while the daemon was stopped\n")
    async with lsp_session(workspace, state_dir) as session:
        [diagnostic] = await wait_for_diagnostics(session, "src/a.py", present=True)
        assert (diagnostic.source, diagnostic.code) == ("mplp", "drift")
        assert diagnostic.severity == types.DiagnosticSeverity.Warning
        assert "differs" in diagnostic.message and "changed on disk at" in diagnostic.message
        status = await session.status()
        assert status["workspaces"][0]["drift"] == 1
        actions = await quick_fixes(session, "src/a.py", [diagnostic])
        assert [a["command"]["arguments"][1] for a in actions] == ["fs", "psg", "merge", "ignore"]
        assert {a["command"]["command"] for a in actions} == {"mplp.resolveDrift"}
        assert {a["kind"] for a in actions} == {"quickfix"}
        assert actions[0]["title"].startswith("Drift: file system wins")
        answer = await resolve(session, "src/a.py", "fs")
        assert answer["ok"], answer
        await wait_for_diagnostics(session, "src/a.py", present=False)
        assert (await session.status())["workspaces"][0]["drift"] == 0
    resolved = [
        e
        for e in read_events(state_dir, "graph_update")
        if e["event_type"] == "file_drift_resolved"
    ]
    assert [e["payload"]["strategy"] for e in resolved] == ["fs"]


async def test_the_diagnostic_is_sent_again_when_its_file_is_opened(
    workspace: Path, state_dir: Path
) -> None:
    """eglot keeps no diagnostic of a file it does not have open: opening it must bring it."""
    await record(workspace, state_dir, {"src/a.py": "x = 1\n"})
    (workspace / "src/a.py").write_text("x = 2\n")
    async with lsp_session(workspace, state_dir, client_name="neovim") as session:
        await wait_for_diagnostics(session, "src/a.py", present=True)
        del session.client.diagnostics[session.uri("src/a.py")]  # dropped, as eglot does
        session.open("src/a.py", "x = 2\n")
        [diagnostic] = await wait_for_diagnostics(session, "src/a.py", present=True)
    assert diagnostic.code == "drift"


async def test_psg_wins_restores_the_old_bytes(workspace: Path, state_dir: Path) -> None:
    original = "keep\r\nthese bytes\tü\n"
    await record(workspace, state_dir, {"src/a.py": original})
    recorded = (workspace / "src/a.py").read_bytes()
    (workspace / "src/a.py").write_text("overwritten\n")
    async with lsp_session(workspace, state_dir) as session:
        await wait_for_diagnostics(session, "src/a.py", present=True)
        answer = await resolve(session, "src/a.py", "psg")
        assert answer["ok"], answer
        await wait_for_diagnostics(session, "src/a.py", present=False)
    assert (workspace / "src/a.py").read_bytes() == recorded


async def test_merge_clean_and_with_conflict(workspace: Path, state_dir: Path) -> None:
    commit(workspace, "src/clean.txt", BASE)
    commit(workspace, "src/clash.txt", BASE)
    await record(
        workspace,
        state_dir,
        {
            "src/clean.txt": BASE.replace("line 1\n", "line 1 psg\n"),
            "src/clash.txt": BASE.replace("line 5\n", "line 5 psg\n"),
        },
    )
    (workspace / "src/clean.txt").write_text(BASE.replace("line 10\n", "line 10 disk\n"))
    (workspace / "src/clash.txt").write_text(BASE.replace("line 5\n", "line 5 disk\n"))
    async with lsp_session(workspace, state_dir) as session:
        await wait_for_diagnostics(session, "src/clean.txt", present=True)
        await wait_for_diagnostics(session, "src/clash.txt", present=True)
        assert (await resolve(session, "src/clean.txt", "merge"))["ok"]
        await wait_for_diagnostics(session, "src/clean.txt", present=False)
        answer = await resolve(session, "src/clash.txt", "merge")
        assert not answer["ok"] and answer["conflicts"] == 1
        await asyncio.sleep(0.5)
        [diagnostic] = session.client.diagnostics[session.uri("src/clash.txt")]
        assert "conflict" in diagnostic.message
    merged = (workspace / "src/clean.txt").read_text()
    assert "line 1 psg\n" in merged and "line 10 disk\n" in merged
    clash = (workspace / "src/clash.txt").read_text()
    assert "<<<<<<<" in clash and "line 5 psg" in clash and "line 5 disk" in clash


async def test_deleting_or_renaming_a_drifted_file_clears_it(
    workspace: Path, state_dir: Path
) -> None:
    await record(workspace, state_dir, {"src/del.py": "a\n", "src/ren.py": "b\n"})
    (workspace / "src/del.py").write_text("a changed\n")
    (workspace / "src/ren.py").write_text("b changed\n")
    async with lsp_session(workspace, state_dir) as session:
        await wait_for_diagnostics(session, "src/del.py", present=True)
        await wait_for_diagnostics(session, "src/ren.py", present=True)
        (workspace / "src/del.py").unlink()
        session.client.workspace_did_delete_files(
            types.DeleteFilesParams(files=[types.FileDelete(uri=session.uri("src/del.py"))])
        )
        (workspace / "src/ren.py").rename(workspace / "src/moved.py")
        session.client.workspace_did_rename_files(
            types.RenameFilesParams(
                files=[
                    types.FileRename(
                        old_uri=session.uri("src/ren.py"), new_uri=session.uri("src/moved.py")
                    )
                ]
            )
        )
        await wait_for_diagnostics(session, "src/del.py", present=False)
        await wait_for_diagnostics(session, "src/ren.py", present=False)
        assert not session.client.diagnostics.get(session.uri("src/moved.py"))


async def test_pull_diagnostics_and_the_scan_command(workspace: Path, state_dir: Path) -> None:
    await record(workspace, state_dir, {"src/a.py": "x\n", "src/b.py": "y\n"})
    capabilities = client_capabilities("neovim")
    assert capabilities.workspace is not None
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(
        refresh_support=True
    )
    # An editor watcher that misses the change below (so the server does not watch itself).
    capabilities.workspace.did_change_watched_files = types.DidChangeWatchedFilesClientCapabilities(
        dynamic_registration=True, relative_pattern_support=True
    )
    async with lsp_session(workspace, state_dir, capabilities=capabilities) as session:
        await asyncio.sleep(0.5)
        (workspace / "src/b.py").write_text("changed with the daemon running\n")
        result = await session.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="mplp.scanDrift", arguments=[])
        )
        [summary] = plain(result)
        assert summary["drifted"] == 1
        report = await session.client.workspace_diagnostic_async(
            types.WorkspaceDiagnosticParams(previous_result_ids=[])
        )
        assert [item.uri for item in report.items] == [session.uri("src/b.py")]
        document = await session.client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(
                text_document=types.TextDocumentIdentifier(uri=session.uri("src/b.py"))
            )
        )
        assert isinstance(document, types.RelatedFullDocumentDiagnosticReport)
        assert [d.source for d in document.items] == ["mplp"]
        assert session.client.diagnostics == {}  # pulled, not pushed

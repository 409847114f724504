"""End to end: a real ``mplp-lsp serve`` driven by pytest-lsp as VS Code and as Neovim."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from lsprotocol import types

from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from tests.e2e.harness import Session, lsp_session, read_events
from tests.support.waiting import wait_until_async

CLIENTS = ["visual-studio-code", "neovim"]


def assert_all_valid(state_dir: Path) -> None:
    events = read_events(state_dir)
    assert events, "no events stored"
    for event in events:
        kind = (
            Kind.ENVELOPE
            if event.get("event_family") in {"ExternalIntegrationEvent", "external_integration"}
            else Kind(event["event_family"])
        )
        result = validate(kind, event)
        assert result.ok, (event, result.to_dict())


@pytest.mark.parametrize("client_name", CLIENTS)
async def test_a_thousand_saves_of_one_file_become_one_event(
    workspace: Path, state_dir: Path, client_name: str
) -> None:
    (workspace / "src/app.py").write_text("print(1)\n")  # there before the editor
    async with lsp_session(workspace, state_dir, client_name=client_name) as session:
        session.open("src/app.py", "print(1)\n")
        (workspace / "src/app.py").write_text("print(1)\nprint(2)\n")
        for _ in range(1000):
            session.save("src/app.py")
        events = await session.wait_for_events(1, settle=1.0)
    [event] = events
    assert event["payload"]["file_path"] == "src/app.py"
    assert event["payload"]["change_type"] == "modified"
    assert event["payload"]["language"] == "python"
    assert event["source_module"] == "ide"
    assert_all_valid(state_dir)


async def test_each_event_has_its_own_documents_language(workspace: Path, state_dir: Path) -> None:
    files = {"src/a.py": "python", "src/notes.txt": "markdown", "src/Makefile": "makefile"}
    async with lsp_session(workspace, state_dir) as session:
        for path, language_id in files.items():
            (workspace / path).write_text("x\n")
            session.open(path, "x\n", language_id)
        for path in files:
            session.save(path, "y\n")
        events = await session.wait_for_events(3)
    assert {e["payload"]["file_path"]: e["payload"]["language"] for e in events} == files


async def test_a_client_that_gives_every_document_one_language_id_is_not_believed(
    workspace: Path, state_dir: Path
) -> None:
    """eglot 1.9 labels every document with the mode its server was started for."""
    async with lsp_session(workspace, state_dir) as session:
        for path in ("src/a.py", "src/Makefile", "src/data.json", "src/LICENSE"):
            (workspace / path).write_text("x\n")
            session.open(path, "x\n", "python")
            session.save(path, "y\n")
        events = await session.wait_for_events(4)
    languages = {e["payload"]["file_path"]: e["payload"].get("language") for e in events}
    assert languages == {
        "src/a.py": "python",
        "src/Makefile": "makefile",
        "src/data.json": "json",
        "src/LICENSE": None,
    }


async def test_five_hundred_files_become_five_hundred_events(
    workspace: Path, state_dir: Path
) -> None:
    async with lsp_session(workspace, state_dir, client_name="neovim") as session:
        for i in range(500):
            session.save(f"src/m{i}.py", f"x = {i}\n")
        events = await session.wait_for_events(500, settle=1.0)
    assert sorted(e["payload"]["file_path"] for e in events) == sorted(
        f"src/m{i}.py" for i in range(500)
    )
    # one PSG file node per file: small transactions one event each, big ones a bulk event
    # (after the one bulk event of the baseline: the files that were there)
    baseline, *nodes = read_events(state_dir, "graph_update")
    assert baseline["event_type"] == "file_nodes_baseline"
    assert sum(n["node_delta"] for n in nodes) == 500
    assert {n["update_kind"] for n in nodes} <= {"node_add", "bulk"}
    assert_all_valid(state_dir)


async def test_line_counts_compare_with_the_last_emitted_text(
    workspace: Path, state_dir: Path
) -> None:
    (workspace / "src/a.py").write_text("a\nb\nc\n")
    async with lsp_session(workspace, state_dir) as session:
        session.open("src/a.py", "a\nb\nc\n")
        session.edit("src/a.py", "a\nB\nc\nd\n")
        session.save("src/a.py", "a\nB\nc\nd\n")
        [event] = await session.wait_for_events(1)
    assert (event["payload"]["lines_added"], event["payload"]["lines_removed"]) == (2, 1)


async def test_rename_create_delete_and_delete_of_unopened_file(
    workspace: Path, state_dir: Path
) -> None:
    (workspace / "src/old.py").write_text("x\n")
    (workspace / "src/gone.py").write_text("y\n")
    async with lsp_session(workspace, state_dir) as session:
        # create then delete inside the quiet window: nothing at all
        session.client.workspace_did_create_files(
            types.CreateFilesParams(files=[types.FileCreate(uri=session.uri("src/tmp.py"))])
        )
        session.client.workspace_did_delete_files(
            types.DeleteFilesParams(files=[types.FileDelete(uri=session.uri("src/tmp.py"))])
        )
        # a rename the editor performed
        (workspace / "src/old.py").rename(workspace / "src/new.py")
        session.client.workspace_did_rename_files(
            types.RenameFilesParams(
                files=[
                    types.FileRename(
                        old_uri=session.uri("src/old.py"), new_uri=session.uri("src/new.py")
                    )
                ]
            )
        )
        # a file deleted without ever being opened
        (workspace / "src/gone.py").unlink()
        session.client.workspace_did_delete_files(
            types.DeleteFilesParams(files=[types.FileDelete(uri=session.uri("src/gone.py"))])
        )
        events = await session.wait_for_events(2, settle=1.0)
    by_path = {e["payload"]["file_path"]: e["payload"] for e in events}
    assert set(by_path) == {"src/new.py", "src/gone.py"}
    assert by_path["src/new.py"]["change_type"] == "renamed"
    assert by_path["src/new.py"]["previous_path"] == "src/old.py"
    assert by_path["src/gone.py"]["change_type"] == "deleted"
    assert_all_valid(state_dir)


async def test_watched_files_are_registered_and_a_delete_create_pair_is_a_rename(
    workspace: Path, state_dir: Path
) -> None:
    (workspace / "src/b.py").write_text("same\n")
    async with lsp_session(workspace, state_dir) as session:
        await wait_until_async(lambda: session.registrations, timeout=10, what="a registration")
        assert [r.method for r in session.registrations] == ["workspace/didChangeWatchedFiles"]
        (workspace / "src/b.py").rename(workspace / "src/c.py")
        session.client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[
                    types.FileEvent(uri=session.uri("src/b.py"), type=types.FileChangeType.Deleted),
                    types.FileEvent(uri=session.uri("src/c.py"), type=types.FileChangeType.Created),
                ]
            )
        )
        [event] = await session.wait_for_events(1, settle=1.0)
    assert (
        event["payload"]["change_type"],
        event["payload"]["file_path"],
        event["payload"]["previous_path"],
    ) == (
        "renamed",
        "src/c.py",
        "src/b.py",
    )


async def test_neovim_gets_no_watched_file_registration(workspace: Path, state_dir: Path) -> None:
    async with lsp_session(workspace, state_dir, client_name="neovim") as session:
        # Ready (the session waits for it) comes after the server decided whether to register
        # (in ``initialized``), and a registration would have reached the client before it.
        assert session.registrations == []


async def test_paths_outside_the_workspace_are_refused_and_counted(
    workspace: Path, state_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("s3cret\n")
    (workspace / "src/link.txt").symlink_to(outside)
    async with lsp_session(workspace, state_dir) as session:
        session.save("../secret.txt")
        session.client.text_document_did_save(
            types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(
                    uri=session.uri("src") + "/%2e%2e/%2e%2e/secret.txt"
                )
            )
        )
        session.save("src/link.txt")
        session.save("src/fine.py", "ok\n")
        events = await session.wait_for_events(1, settle=1.0)
        status = await session.status()
    assert [e["payload"]["file_path"] for e in events] == ["src/fine.py"]
    assert status["refused"] == 3
    [folder] = status["workspaces"]
    assert folder["rejected"] == 3
    log_lines = (state_dir / "integration-errors.jsonl").read_text().splitlines()
    assert len(log_lines) == 3
    assert "s3cret" not in (state_dir / "integration-errors.jsonl").read_text()


async def test_ignored_paths_make_no_events(workspace: Path, state_dir: Path) -> None:
    (workspace / ".gitignore").write_text("build/\n*.log\n")
    async with lsp_session(workspace, state_dir, settings={"exclude": ["vendor/**"]}) as session:
        for relative in (
            ".git/config",
            "build/out.js",
            "debug.log",
            "vendor/lib.py",
            "src/kept.py",
        ):
            session.save(relative, "x\n")
        events = await session.wait_for_events(1, settle=1.0)
    assert [e["payload"]["file_path"] for e in events] == ["src/kept.py"]


async def test_status_notification_follows_commits(workspace: Path, state_dir: Path) -> None:
    async with lsp_session(workspace, state_dir) as session:
        session.save("src/s.py", "x\n")
        await session.wait_for_events(1, settle=1.0)
    assert session.statuses, "no mplp/status notification"


async def test_no_status_notification_to_a_client_that_did_not_ask(
    workspace: Path, state_dir: Path
) -> None:
    """Only the plugins handle mplp/status; lsp-mode would warn about each one in a window."""
    async with lsp_session(workspace, state_dir, notifications=()) as session:
        session.save("src/s.py", "x\n")
        await session.wait_for_events(1, settle=1.0)
        status = await session.status()  # the request still answers
    assert status["workspaces"][0]["events_by_kind"]["file_update"] == 1
    assert session.statuses == []


async def test_a_second_server_on_the_same_state_dir_follows_the_first(
    workspace: Path, state_dir: Path
) -> None:
    async with (
        lsp_session(workspace, state_dir) as first,
        lsp_session(workspace, state_dir) as second,
    ):
        status = await second.status()
        (workspace / "src" / "second.py").write_text("x = 1\n")
        second.save("src/second.py")
        events = await first.wait_for_events(1)
    [folder] = status["workspaces"]
    assert folder["role"] == "follower"
    assert folder["owner_pid"] == first.client._server.pid  # type: ignore[union-attr]
    # Handed over through the inbox: stored by the first server, once.
    assert [e["payload"]["file_path"] for e in events] == ["src/second.py"]


def watched(session: Session, *changes: tuple[str, types.FileChangeType]) -> None:
    session.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=session.uri(path), type=kind) for path, kind in changes]
        )
    )


async def test_editor_lock_files_are_no_event_for_the_owner_nor_a_follower(
    workspace: Path, state_dir: Path
) -> None:
    """Emacs locks a modified buffer with a link ``.#name`` to ``user@host.pid``; both
    servers' editors report it. Neither the link nor its target may become a path."""
    created = types.FileChangeType.Created
    async with (
        lsp_session(workspace, state_dir) as first,
        lsp_session(workspace, state_dir) as second,
    ):
        for session, name in ((first, "a.py"), (second, "b.py")):
            lock = workspace / "src" / f".#{name}"
            lock.symlink_to(f"someone@host.{os.getpid()}:1700000000")
            watched(session, (f"src/.#{name}", created), (f"src/#{name}#", created))
            session.save(f"src/{name}", "x\n")
            watched(session, (f"src/{name}", types.FileChangeType.Changed))
            lock.unlink()
            watched(session, (f"src/.#{name}", types.FileChangeType.Deleted))
        events = await first.wait_for_events(2, settle=1.5)
    assert sorted(e["payload"]["file_path"] for e in events) == ["src/a.py", "src/b.py"]


async def test_kill_minus_9_loses_nothing_committed(workspace: Path, state_dir: Path) -> None:
    async with lsp_session(workspace, state_dir) as session:
        session.save("src/k.py", "x\n")
        await session.wait_for_events(1, settle=0.0)
        pid = session.client._server.pid  # type: ignore[union-attr]
        os.kill(pid, 9)
        await session.client._server.wait()  # type: ignore[union-attr]
        session.client.capabilities = None  # the server is gone: no shutdown handshake
    conn = sqlite3.connect(state_dir / "events.db")
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    async with lsp_session(workspace, state_dir) as session:
        session.save("src/after.py", "y\n")
        events = await session.wait_for_events(2)
    assert [e["payload"]["file_path"] for e in events] == ["src/k.py", "src/after.py"]

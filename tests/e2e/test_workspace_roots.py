"""A store belongs to one workspace folder (real servers, real stores).

With one state dir for every workspace (``--state-dir``, ``MPLP_LSP_STATE_DIR`` or a
user-level ``stateDir``), a server for another folder records into that folder's own store
beside it, never into the first folder's, and never follows a server of another folder. A file
outside every folder is not recorded, and the user is told why; so is an editor that gives the
server no folder at all.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client

from tests.e2e.harness import Session, lsp_session, read_events, server_env, wait_until_ready


def stored_paths(state: Path) -> list[str]:
    return [e["payload"]["file_path"] for e in read_events(state, "file_update")]


async def test_a_server_for_another_folder_records_into_its_own_store(
    tmp_path: Path, state_dir: Path
) -> None:
    repo, other = tmp_path / "repo", tmp_path / "other"
    repo.mkdir()
    other.mkdir()
    async with (
        lsp_session(repo, state_dir) as first,
        lsp_session(other, state_dir) as second,
    ):
        [folder] = (await second.status())["workspaces"]
        first.save("a.py", "a\n")
        second.save("o.txt", "o\n")
        await first.wait_for_events(1)
        await asyncio.sleep(1.0)
    assert folder["role"] == "owner"
    own = Path(folder["state_dir"])
    assert own.parent == state_dir / "workspaces"
    assert stored_paths(state_dir) == ["a.py"]
    assert stored_paths(own) == ["o.txt"]
    assert (state_dir / "workspace").read_text().strip() == str(repo.resolve())


async def test_two_folders_of_one_server_with_one_state_dir_each_get_a_store(
    tmp_path: Path, state_dir: Path
) -> None:
    """stateDir in the user's settings applies to every folder the editor opens."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    # --state-dir names the first folder's; the setting applies to both
    async with lsp_session(
        one, state_dir, folders=[one, two], settings={"stateDir": str(state_dir)}
    ) as session:
        folders = {f["root"]: f for f in (await session.status())["workspaces"]}
        session.save("a.py", "a\n")
        (two / "b.py").write_text("b\n")
        session.client.text_document_did_save(
            types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=(two / "b.py").as_uri())
            )
        )
        await asyncio.sleep(1.5)
    assert {f["role"] for f in folders.values()} == {"owner"}
    stores = {root: Path(f["state_dir"]) for root, f in folders.items()}
    assert stores[str(one.resolve())] == state_dir
    assert stores[str(two.resolve())].parent == state_dir / "workspaces"
    assert stored_paths(stores[str(one.resolve())]) == ["a.py"]
    assert stored_paths(stores[str(two.resolve())]) == ["b.py"]


async def test_a_file_outside_every_folder_is_not_recorded_and_the_user_is_told(
    workspace: Path, state_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    async with lsp_session(workspace, state_dir) as session:
        for name in ("x.txt", "y.txt"):
            (outside / name).write_text("x\n")
            session.client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(
                        uri=(outside / name).as_uri(), language_id="plaintext", version=1,
                        text="x\n",
                    )
                )
            )  # fmt: skip
        await asyncio.sleep(1.0)
    shown = [m.message for m in session.client.messages if "outside" in m.message]
    logged = [m.message for m in session.client.log_messages if "outside" in m.message]
    assert len(shown) == 1 and str(outside / "x.txt") in shown[0]
    assert len(logged) == 1 and str(outside / "y.txt") in logged[0]
    assert str(workspace) in shown[0]


async def test_no_folder_at_all_is_explained(tmp_path: Path, state_dir: Path) -> None:
    client = make_test_lsp_client()
    await client.start_io(
        sys.executable, "-m", "mplp_lsp", "serve", "--state-dir", str(state_dir),
        env=server_env(),
    )  # fmt: skip
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"),
            process_id=os.getpid(),
            root_uri=None,
        )
    )
    try:
        await wait_until_ready(Session(client, tmp_path, state_dir))
    finally:
        await client.shutdown_session()
        await client.stop()
    [message] = [m for m in client.messages if "rootUri is null" in m.message]
    assert message.type == types.MessageType.Warning
    assert not (state_dir / "events.db").exists()

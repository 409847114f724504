"""What happens beside the editor's saves, in a real terminal Emacs (eglot and lsp-mode): a
dired rename, and a directory made outside Emacs while it runs."""

from __future__ import annotations

from pathlib import Path

from tests.emacs.host import Client, running_emacs
from tests.emacs.store import payloads


def test_a_dired_rename_is_renamed(client: Client, repo: Path, state: Path, tmp_path: Path) -> None:
    with running_emacs(client, tmp_path, cwd=repo, env={"MPLP_LSP_STATE_DIR": str(state)}) as emacs:
        emacs.open(repo / "a.py")
        emacs.ready(repo / "a.py")
        emacs.keys("C-x", "d")
        emacs.wait("the dired prompt", lambda: "Dired (directory):" in emacs.screen())
        emacs.keys("C-a", "C-k", f"{repo}/", "Enter")
        emacs.wait("the dired buffer", lambda: "notes.txt" in emacs.screen())
        emacs.keys("C-s", "notes.txt", "Enter", "R")
        emacs.wait("the rename prompt", lambda: "Rename notes.txt to:" in emacs.screen())
        emacs.keys("C-a", "C-k", str(repo / "renamed.txt"), "Enter")
        emacs.wait("the rename stored", lambda: payloads(state))
        emacs.quit()
    [event] = payloads(state)
    assert (event["file_path"], event["change_type"], event.get("previous_path")) == (
        "renamed.txt",
        "renamed",
        "notes.txt",
    )


def test_a_directory_made_outside_emacs_is_recorded(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    with running_emacs(client, tmp_path, cwd=repo, env={"MPLP_LSP_STATE_DIR": str(state)}) as emacs:
        emacs.open(repo / "a.py")
        emacs.ready(repo / "a.py")
        (repo / "made" / "below").mkdir(parents=True)
        (repo / "made" / "below" / "x.txt").write_text("x\n")
        emacs.wait("the new file stored", lambda: payloads(state))
        emacs.quit()
    assert [(e["file_path"], e["change_type"]) for e in payloads(state)] == [
        ("made/below/x.txt", "created")
    ]


def test_a_binary_file_is_recorded_without_an_error(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    """A client cannot send a binary buffer as JSON text: the configurations leave it
    out, and the server's watcher records its save."""
    binary = repo / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with running_emacs(client, tmp_path, cwd=repo, env={"MPLP_LSP_STATE_DIR": str(state)}) as emacs:
        emacs.open(repo / "a.py")
        emacs.ready(repo / "a.py")
        emacs.keys("C-x", "C-f")
        emacs.wait("the find-file prompt", lambda: "Find file:" in emacs.screen())
        emacs.keys("C-a", "C-k", str(binary), "Enter")
        emacs.wait("the binary buffer", lambda: "blob.bin" in emacs.screen())
        emacs.type_and_save("x")
        emacs.wait("the save stored", lambda: payloads(state))
        messages = emacs.eval('(with-current-buffer "*Messages*" (buffer-string))')
        emacs.quit()
    assert "utf-8-string-p" not in messages and "error" not in messages.lower()
    assert [(e["file_path"], e["change_type"]) for e in payloads(state)] == [
        ("blob.bin", "modified")
    ]

"""Stores and workspaces with real terminal Emacs (eglot and lsp-mode): two Emacs on one
repository, and a folder outside it while the state dir is shared."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.nvim_session import git_repo
from tests.emacs.host import Client, running_emacs
from tests.emacs.store import file_events, file_events_reach, stored_in


def test_two_emacs_on_one_repository_store_each_save_once(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    env = {"MPLP_LSP_STATE_DIR": str(state), "MPLP_LSP_DEBOUNCE_MS": "200"}
    first_file, second_file = repo / "a.py", repo / "src" / "lib.py"
    with (
        running_emacs(client, tmp_path, cwd=repo, env=env, name="first") as first,
        running_emacs(client, tmp_path, cwd=repo, env=env, name="second") as second,
    ):
        first.open(first_file)
        first.ready(first_file, "owner")
        second.open(second_file)
        second.ready(second_file, "follower")
        for count in range(1, 4):
            first.type_and_save(f"\nfirst{count} = {count}")
            first.wait("the first's save", file_events_reach(state, 2 * count - 1))
            second.type_and_save(f"\nsecond{count} = {count}")
            second.wait("the second's save", file_events_reach(state, 2 * count))
        second.quit()
        first.quit()
    events = file_events(state)
    assert sorted(events) == sorted([("a.py", "modified")] * 3 + [("src/lib.py", "modified")] * 3)


def test_a_file_of_another_folder_is_not_in_the_repository_store(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    """With one state dir for every workspace (MPLP_LSP_STATE_DIR), a file of another folder
    is recorded in that folder's own store, never in the repository's. eglot starts a server
    for a folder without Git too; lsp-mode only for a project, so there it is a repository."""
    other = tmp_path / "other"
    if client == "lsp-mode":
        git_repo(other, {"o.txt": "o\n"})
    else:
        other.mkdir()
        (other / "o.txt").write_text("o\n")
    env = {"MPLP_LSP_STATE_DIR": str(state), "MPLP_LSP_DEBOUNCE_MS": "200"}
    with running_emacs(client, tmp_path, cwd=repo, env=env) as emacs:
        emacs.open(repo / "a.py")
        emacs.ready(repo / "a.py")
        emacs.type_and_save("\nb = 2")
        emacs.wait("the repository's save", lambda: file_events(state))
        emacs.open(other / "o.txt")
        emacs.ready(other / "o.txt")
        emacs.type_and_save("more\n")
        emacs.wait("the other folder's save", lambda: stored_in(other.resolve(), env))
        emacs.quit()
    assert file_events(state) == [("a.py", "modified")]
    assert [(e["file_path"], e["change_type"]) for e in stored_in(other.resolve(), env)] == [
        ("o.txt", "modified")
    ]
    assert subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split() == ["M", "a.py"]

"""Saving from a real terminal Emacs (eglot and lsp-mode): what the store records."""

from __future__ import annotations

from pathlib import Path

from tests.emacs.host import Client, running_emacs
from tests.emacs.store import file_events, file_events_reach, payloads

QUIET_MS = "200"


def settings(state: Path) -> dict[str, str]:
    return {"MPLP_LSP_STATE_DIR": str(state), "MPLP_LSP_DEBOUNCE_MS": QUIET_MS}


def test_each_save_is_one_event_and_no_warning(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    with running_emacs(client, tmp_path, cwd=repo, env=settings(state)) as emacs:
        target = repo / "a.py"
        emacs.open(target)
        emacs.ready(target)
        for count in range(1, 11):
            emacs.type_and_save(f"\nb{count} = {count}")
            emacs.wait(f"save {count} stored", file_events_reach(state, count))
        assert file_events(state) == [("a.py", "modified")] * 10
        # lsp-mode warns in *Warnings* about every notification it does not know
        assert emacs.warnings() is None
        emacs.quit()


def test_a_new_file_saved_from_emacs_is_created(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    with running_emacs(client, tmp_path, cwd=repo, env=settings(state)) as emacs:
        emacs.open(repo / "a.py")
        emacs.ready(repo / "a.py")
        fresh = repo / "src" / "fresh.py"
        emacs.open(fresh)
        emacs.type_and_save("x = 1")
        emacs.wait("the new file stored", lambda: file_events(state))
        emacs.type_and_save("\ny = 2")
        emacs.wait("the second save stored", lambda: len(file_events(state)) >= 2)
        assert file_events(state) == [("src/fresh.py", "created"), ("src/fresh.py", "modified")]
        emacs.quit()


def test_save_then_quit_stores_the_save(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    env = {**settings(state), "MPLP_LSP_DEBOUNCE_MS": "500"}  # the default quiet period
    with running_emacs(client, tmp_path, cwd=repo, env=env) as emacs:
        emacs.open(repo / "a.py")
        emacs.ready(repo / "a.py")
        emacs.type_and_save("\nlast = 1")
        emacs.wait("the save written", lambda: "last = 1" in (repo / "a.py").read_text())
        emacs.quit()  # at once: within the quiet period
    assert file_events(state) == [("a.py", "modified")]


def test_each_file_keeps_its_own_language(
    client: Client, repo: Path, state: Path, tmp_path: Path
) -> None:
    names = ["a.py", "Makefile", "data.json", "notes.txt"]
    with running_emacs(client, tmp_path, cwd=repo, env=settings(state)) as emacs:
        for count, name in enumerate(names, 1):
            emacs.open(repo / name)
            emacs.ready(repo / name)
            emacs.type_and_save("\n")
            emacs.wait(f"{name} stored", file_events_reach(state, count))
        emacs.quit()
    languages = {p["file_path"]: p.get("language") for p in payloads(state)}
    assert languages == {
        "a.py": "python",
        "Makefile": "makefile",
        "data.json": "json",
        "notes.txt": "plaintext",
    }

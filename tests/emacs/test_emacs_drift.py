"""Drift in a real terminal Emacs (eglot and lsp-mode): shown when the file is opened, and the
quick fixes that rewrite it go through the buffer (undo, no "changed on disk" question)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import read_events
from tests.emacs.host import Client, Emacs, running_emacs
from tests.emacs.store import record

BASE = "def f():\n    return 1\n"
RECORDED = "def f():\n    return 2\n"  # what the daemon recorded last
ON_DISK = "def f():\n    return 3\n"  # changed while no daemon ran
PICK = {"eglot": "eglot-code-actions", "lsp-mode": "lsp-execute-code-action"}


@pytest.fixture
def drifted(repo: Path, state: Path) -> Path:
    """src/lib.py: committed as BASE, recorded as RECORDED, on disk ON_DISK."""
    target = repo / "src" / "lib.py"
    assert target.read_text() == BASE  # as the repository fixture commits it
    target.write_text(RECORDED)
    record(repo, state, "src/lib.py")
    target.write_text(ON_DISK)
    return target


def open_drifted(emacs: Emacs, repo: Path, drifted: Path) -> None:
    """Start on another file, so the drift is found before lib.py is opened."""
    emacs.open(repo / "a.py")
    emacs.ready(repo / "a.py")
    emacs.open(drifted)
    emacs.wait(
        "the drift diagnostic of lib.py",
        lambda: any("Drift" in text for text in emacs.diagnostics(drifted)),
    )


def test_drift_is_shown_for_a_file_opened_after_start_up(
    client: Client, repo: Path, state: Path, drifted: Path, tmp_path: Path
) -> None:
    with running_emacs(client, tmp_path, cwd=repo, env={"MPLP_LSP_STATE_DIR": str(state)}) as emacs:
        open_drifted(emacs, repo, drifted)
        [message] = emacs.diagnostics(drifted)
        assert "differs from the project graph" in message
        emacs.quit()


def fix(emacs: Emacs, title: str) -> None:
    emacs.command(PICK[emacs.client], title)


def resolutions(state: Path) -> list[str]:
    """The strategies of the drift resolutions the store records."""
    return [
        e["payload"]["strategy"]
        for e in read_events(state, "graph_update")
        if e["event_type"] == "file_drift_resolved"
    ]


def test_psg_wins_restores_the_buffer_and_the_file(
    client: Client, repo: Path, state: Path, drifted: Path, tmp_path: Path
) -> None:
    with running_emacs(client, tmp_path, cwd=repo, env={"MPLP_LSP_STATE_DIR": str(state)}) as emacs:
        open_drifted(emacs, repo, drifted)
        fix(emacs, "Drift: PSG wins (restore the recorded content)")
        emacs.wait("the buffer restored", lambda: emacs.buffer(drifted)[0] == RECORDED)
        emacs.save()
        emacs.wait("the file restored", lambda: drifted.read_text() == RECORDED)
        emacs.wait("the drift cleared", lambda: not emacs.diagnostics(drifted))
        assert emacs.buffer(drifted) == (RECORDED, False)
        assert "changed on disk" not in emacs.screen()
        # one undo brings the text of the disk back into the buffer
        emacs.wait("the resolution recorded", lambda: resolutions(state) == ["psg"])
        emacs.keys("C-x", "u")
        emacs.wait("the undo", lambda: emacs.buffer(drifted)[0] == ON_DISK)
        emacs.quit()


def test_merge_conflicts_are_in_the_buffer_and_the_file(
    client: Client, repo: Path, state: Path, drifted: Path, tmp_path: Path
) -> None:
    with running_emacs(client, tmp_path, cwd=repo, env={"MPLP_LSP_STATE_DIR": str(state)}) as emacs:
        open_drifted(emacs, repo, drifted)
        fix(emacs, "Drift: three-way merge")
        emacs.wait(
            "the conflict markers in the buffer", lambda: "<<<<<<<" in emacs.buffer(drifted)[0]
        )
        merged = emacs.buffer(drifted)[0]
        assert "return 2" in merged and "return 3" in merged and ">>>>>>>" in merged
        emacs.save()
        emacs.wait("the file saved", lambda: drifted.read_text() == merged)
        assert emacs.buffer(drifted) == (merged, False)
        assert "changed on disk" not in emacs.screen()
        emacs.wait("the resolution recorded", lambda: resolutions(state) == ["merge"])
        emacs.quit()

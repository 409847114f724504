"""``mplp-lsp drift`` on a repository whose branch moved in a way no event reports: the
drift is shown, ``--resolve fs`` clears it, and the exit status always says what the
output says."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.hooked import mplp
from tests.gitrepo import Repo


def drift(repo: Repo, state: Path, *args: str) -> tuple[int, str]:
    done = mplp(
        "drift", *args, "--workspace", str(repo.path), "--state-dir", str(state), check=False
    )
    return done.returncode, done.stdout + done.stderr


def test_resolve_fs_clears_repository_drift(tmp_path: Path) -> None:
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    repo.commit("one")
    assert drift(repo, state) == (0, "no drift (0 files checked)\n")  # the baseline
    repo.commit("two")  # reported by the next scan's poll: the PSG's main is at two
    assert drift(repo, state)[0] == 0
    repo.git("reset", "-q", "--hard", "HEAD~1")  # a move no event reports
    status, output = drift(repo, state)
    assert status == 1 and "Repository drift" in output, output
    assert "no drift" not in output  # what it prints and how it exits agree
    status, output = drift(repo, state, "--resolve", "fs")
    assert status == 0 and output.splitlines()[-1] == "no drift (0 files checked)", output
    assert output.startswith("resolved      fs     (repository): the PSG now records main at ")
    assert drift(repo, state) == (0, "no drift (0 files checked)\n")

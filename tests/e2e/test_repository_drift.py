"""``mplp-lsp drift`` on a repository whose branch moved in a way no event reports: the
drift is shown, ``--resolve fs`` clears it, and the exit status always says what the
output says."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.hooked import mplp, wait_for, watching
from tests.gitrepo import Repo


def drift(repo: Repo, state: Path, *args: str) -> tuple[int, str]:
    done = mplp(
        "drift", *args, "--workspace", str(repo.path), "--state-dir", str(state), check=False
    )
    # stderr names the workspace and store read (cli/common.reading): the verdict is stdout.
    return done.returncode, done.stdout


async def test_resolve_fs_clears_repository_drift(tmp_path: Path) -> None:
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    repo.commit("one")
    async with watching(repo, state):  # the daemon records: the PSG's main is at two
        await wait_for(state, repo.commit("two"))
    assert drift(repo, state) == (0, "no drift (1 files checked)\n")  # file.txt, as saved
    repo.git("reset", "-q", "--hard", "HEAD~1")  # a move no event reports
    status, output = drift(repo, state)
    assert status == 1 and "Repository drift" in output, output
    assert "no drift" not in output  # what it prints and how it exits agree
    status, output = drift(repo, state, "--resolve", "fs")
    assert status == 0 and output.splitlines()[-1] == "no drift (1 files checked)", output
    repository = "resolved      fs     (repository): the PSG now records main at "
    assert [line for line in output.splitlines() if line.startswith(repository)], output
    assert drift(repo, state) == (0, "no drift (1 files checked)\n")  # file.txt, as saved

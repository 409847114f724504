"""A repository's files never run as code: not through the Git hooks, nor the CLI's daemons.

A branch checked out for review carries ``mplp_lsp/__main__.py``, ``sitecustomize.py``,
``usercustomize.py`` and a ``.pth`` file, each of which would write a marker when Python
imports it. Git runs hooks in the worktree and ``python -m`` puts the current directory
first on ``sys.path``; the hooks must start Python so that none of them loads.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from mplp_lsp.vcs import hooks
from tests.gitrepo import BASE_ENV, Repo
from tests.support.git_history import stored_git_events

PLANTED = ("mplp_lsp/__main__.py", "sitecustomize.py", "usercustomize.py", "planted.pth")
CLI = str(Path(sys.executable).with_name("mplp-lsp"))


def plant(root: Path, markers: Path) -> None:
    markers.mkdir(exist_ok=True)
    for name in PLANTED:
        marker = markers / name.replace("/", "_")
        code = f"open({str(marker)!r}, 'w').write('ran')"
        if name.endswith(".pth"):
            code = f"import builtins; {code}"  # a .pth runs only lines starting with import
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(code + "\n", encoding="utf-8")
    (root / "mplp_lsp" / "__init__.py").write_text("", encoding="utf-8")


def shell(repo: Repo, script: str) -> None:
    """Git as a user types it: one shell line, commands chained with &&."""
    env = {"PATH": "/usr/bin:/bin", **BASE_ENV, "HOME": str(repo.path.parent)}
    subprocess.run(["sh", "-c", script], cwd=repo.path, env=env, check=True, timeout=60)


def git_events_after(state: Path, count: int, markers: Path, timeout: float = 30.0) -> int:
    """Wait until the hooks stored ``count`` git events, or a planted file ran instead."""
    deadline = time.monotonic() + timeout
    found = 0
    while time.monotonic() < deadline and not any(markers.iterdir()):
        try:
            found = len(stored_git_events(state / "events.db"))
        except (OSError, sqlite3.Error):  # not created (or migrated) yet
            found = 0
        if found >= count:
            break
        time.sleep(0.05)
    return found


def test_a_branch_checked_out_for_review_runs_nothing_through_the_hooks(tmp_path: Path) -> None:
    repo, state, markers = Repo.create(tmp_path / "ws"), tmp_path / "state", tmp_path / "markers"
    repo.commit("base")
    subprocess.run(
        [CLI, "hooks", "install", "--workspace", str(repo.path), "--state-dir", str(state)],
        check=True,
        capture_output=True,
    )
    repo.git("checkout", "-q", "-b", "review")
    plant(repo.path, markers)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "planted")  # the first hooks to see the planted files
    shell(
        repo,
        "git checkout -q main && git checkout -q review && "
        "git commit -q --allow-empty -m 'after review' && git checkout -q main",
    )
    # base, planted, after review: three commits, each reported by a hook process
    stored = git_events_after(state, 3, markers)
    time.sleep(0.5)  # a late hook process would have written its marker by now
    assert sorted(p.name for p in markers.iterdir()) == []
    assert stored >= 2


def test_install_upgrades_hooks_of_an_older_format(tmp_path: Path) -> None:
    """The hooks of an older mplp-lsp (Python on every Git command; the first format with
    the worktree on its path) are listed as outdated, with their kind, and `install`
    replaces them: the one this git needs rewritten, the others removed."""
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    install = [CLI, "hooks", "install", "--workspace", str(repo.path), "--state-dir", str(state)]
    status = [CLI, "hooks", "status", "--workspace", str(repo.path)]
    subprocess.run(install, check=True, capture_output=True)
    hooks_dir = repo.path / ".git" / "hooks"
    script = (hooks_dir / "reference-transaction").read_text(encoding="utf-8")
    python = f"{sys.executable} -m mplp_lsp emit git --hook"
    (hooks_dir / "reference-transaction").write_text(
        f"#!/bin/sh\n# mplp-lsp-hook (reference-transaction): reports Git activity\n"
        f"# mplp-lsp-hook-format: 2\n{python} reference-transaction &\n"
    )
    (hooks_dir / "post-commit").write_text(
        f"#!/bin/sh\n# mplp-lsp-hook (post-commit): reports Git activity\n{python} post-commit &\n"
    )
    listed = subprocess.run(status, check=True, capture_output=True, text=True).stdout
    assert (
        "reference-transaction: outdated (format 2: starts Python on every Git command)" in listed
    )
    assert (
        "post-commit: outdated (format 1: starts Python on every Git command, with the worktree"
        in listed
    )
    subprocess.run(install, check=True, capture_output=True)
    listed = subprocess.run(status, check=True, capture_output=True, text=True).stdout
    assert "outdated" not in listed
    assert f"reference-transaction: installed (format {hooks.FORMAT}: shell builtins only" in listed
    assert (hooks_dir / "reference-transaction").read_text(encoding="utf-8") == script
    assert not (hooks_dir / "post-commit").exists()


def test_the_cli_daemons_started_in_a_planted_workspace_import_nothing_from_it(
    tmp_path: Path,
) -> None:
    """``mplp-lsp serve`` and ``watch`` started with the workspace as their directory."""
    workspace, state, markers = tmp_path / "ws", tmp_path / "state", tmp_path / "markers"
    workspace.mkdir()
    plant(workspace, markers)
    watch = subprocess.Popen(
        [CLI, "watch", str(workspace), "--state-dir", str(state)],
        cwd=workspace,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert watch.stderr is not None
        assert b"watching" in watch.stderr.readline()
    finally:
        watch.terminate()
        watch.wait(30)
    serve = subprocess.run(
        [CLI, "serve", "--state-dir", str(state)],
        cwd=workspace,
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert serve.returncode == 0, serve.stderr
    assert sorted(p.name for p in markers.iterdir()) == []

"""Hostile repositories: planted config that must never run, foreign owners, odd layouts.

Each planted program would create a marker file; the marker's absence after the daemon's
own git work proves that nothing was executed. The test's own git commands (making the
commits) run before the config is planted, so a marker can only come from the daemon.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mplp_lsp.drift.merge import head_blob
from mplp_lsp.vcs.repo import GitRepo, RepoRefused
from tests.gitrepo import Repo
from tests.support.calls import counted
from tests.support.git_history import Rig, stored_git_events


def plant(repo: Repo, marker: Path) -> list[str]:
    """Config and attributes that would make git run a program; returns the config keys."""
    program = repo.path.parent / "evil.sh"
    program.write_text(f'#!/bin/sh\necho "$0 $*" >> {shlex.quote(str(marker))}\ncat\n')
    program.chmod(0o755)
    run = str(program)
    keys = {
        "core.fsmonitor": run,
        "core.pager": run,
        "pager.log": run,
        "diff.external": run,
        "diff.evil.textconv": run,
        "diff.evil.command": run,
        "filter.evil.clean": run,
        "filter.evil.smudge": run,
        "filter.evil.process": run,
        "core.sshCommand": run,
        "core.hooksPath": str(repo.path.parent),
        "gpg.program": run,
        "log.showSignature": "true",
        "core.askPass": run,
        "credential.helper": "!" + run,
    }
    with (repo.path / ".git" / "config").open("a") as handle:
        handle.write("[include]\n")  # keep git's own parser happy before our section
        for key, value in keys.items():
            section, _, name = key.rpartition(".")
            head, _, sub = section.partition(".")
            title = f'[{head} "{sub}"]' if sub else f"[{head}]"
            handle.write(f"{title}\n\t{name} = {value}\n")
    (repo.path / ".gitattributes").write_text("* diff=evil filter=evil\n")
    for hook in ("post-checkout", "post-commit", "reference-transaction", "fsmonitor-watchman"):
        (repo.path.parent / hook).symlink_to(program)
    return list(keys)


@pytest.fixture
async def planted(tmp_path: Path) -> AsyncIterator[tuple[Rig, Path]]:
    repo = Repo.create(tmp_path / "ws")
    repo.commit("one")
    state = tmp_path / "state"
    state.mkdir()
    rig = Rig(repo, state)
    await rig.open()
    marker = tmp_path / "ran.txt"
    # New history to report, made before the config is planted.
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("two", "b.txt")
    repo.commit("three", "c.txt")
    repo.git("tag", "-a", "v1", "-m", "release one")
    (repo.path / "b.txt").write_text("dirty, so a status would run the clean filter\n")
    plant(repo, marker)
    yield rig, marker
    await rig.close()


async def test_planted_programs_never_run(planted: tuple[Rig, Path]) -> None:
    rig, marker = planted
    found = await rig.poll()
    kinds = sorted({kind for kind, _, _ in found})
    assert kinds == ["branch_create", "commit", "tag"]
    assert len([f for f in found if f[0] == "commit"]) == 2
    assert not marker.exists(), marker.read_text()
    # Every other git command the daemon starts: repository discovery, the hooks directory,
    # the drift restore's HEAD blob (a file with planted filter and textconv attributes).
    repo = GitRepo.open(rig.repo.path)
    try:
        assert repo.repo_url().startswith("local:")
        assert repo.run("rev-parse", "--git-path", "hooks").strip()
    finally:
        repo.close()
    assert head_blob(rig.repo.path, "c.txt") == b"three\n"
    assert not marker.exists(), marker.read_text()


def test_the_limits_of_the_git_hardening(planted: tuple[Rig, Path]) -> None:
    """What the forced config does not cover, kept visible (docs/threat-model.md): drivers
    named by .gitattributes (textconv, filters, diff commands) run for diff, show and status.
    The daemon runs none of those; this test fails if git ever stops running them, so the
    threat model can be updated."""
    rig, marker = planted
    # A tracked file of the same size with another mtime: its stat data cannot tell git
    # whether it changed, so status runs the clean filter to compare its content. (A dirty
    # file of another size it tells by the size; a clean one only when its mtime is as late
    # as the index's, which is a matter of timing: CI28 saw no filter run.)
    unchanged = rig.repo.path / "c.txt"
    later = unchanged.stat().st_mtime_ns + 5_000_000_000
    os.utime(unchanged, ns=(later, later))
    repo = GitRepo.open(rig.repo.path)
    try:
        repo.run("status", "--porcelain")
    finally:
        repo.close()
    assert marker.exists()


def test_repository_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the repository another owner")
    repo = Repo.create(tmp_path / "theirs")
    repo.commit("one")
    marker = tmp_path / "ran.txt"
    plant(repo, marker)
    for path in [repo.path, *repo.path.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    with pytest.raises(RepoRefused, match="ownership"):
        GitRepo.open(repo.path)
    assert not marker.exists()


async def test_a_dot_git_file_pointing_elsewhere(tmp_path: Path) -> None:
    """A ``.git`` file naming a repository outside the folder: git's own rules apply, and the
    foreign repository's planted config still never runs."""
    elsewhere = Repo.create(tmp_path / "elsewhere")
    elsewhere.commit("one")
    marker = tmp_path / "ran.txt"
    plant(elsewhere, marker)
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / ".git").write_text(f"gitdir: {elsewhere.path / '.git'}\n")
    repo = GitRepo.open(folder)
    try:
        assert repo.info.worktree == folder.resolve()
        assert repo.info.git_dir == (elsewhere.path / ".git").resolve()
        repo.run("log", "-p", "-1")
    finally:
        repo.close()
    assert not marker.exists()
    # A .git file naming nothing is a refusal, not a crash.
    (folder / ".git").write_text("gitdir: /nonexistent/repo\n")
    with pytest.raises(RepoRefused):
        GitRepo.open(folder)
    (folder / ".git").write_bytes(b"\xff\xfe garbage")
    with pytest.raises(RepoRefused):
        GitRepo.open(folder)


async def test_huge_packed_refs_is_read_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo.create(tmp_path / "ws")
    head = repo.commit("one")
    packed = repo.path / ".git" / "packed-refs"
    with packed.open("w") as handle:
        handle.write("# pack-refs with: peeled fully-peeled sorted \n")
        for n in range(200_000):
            handle.write(f"{head} refs/tags/t{n:06d}\n")
    state = tmp_path / "state"
    state.mkdir()
    rig = Rig(repo, state)
    processes: Counter[str] = Counter()
    monkeypatch.setattr(subprocess, "Popen", counted(subprocess.Popen, "git", processes))
    await rig.open()  # the first poll records a baseline of every ref
    monkeypatch.undo()
    try:
        repo.commit("two")
        found = await rig.poll()
        assert found == [("commit", "refs/heads/main", repo.rev("HEAD"))]
        assert processes["git"] <= 20, processes  # not a git process per ref (200,000)
        with packed.open("ab") as handle:  # damage git itself refuses: read around it
            handle.write(b"this line is garbage\n\xff\xfe\n" + b"z" * 100_000 + b"\n")
        assert await rig.poll() == []
    finally:
        await rig.close()


async def test_corrupt_object_is_a_clear_failure_not_a_crash(tmp_path: Path) -> None:
    repo = Repo.create(tmp_path / "ws")
    repo.commit("one")
    state = tmp_path / "state"
    state.mkdir()
    rig = Rig(repo, state)
    await rig.open()
    try:
        commit = repo.commit("two")
        obj = repo.path / ".git" / "objects" / commit[:2] / commit[2:]
        obj.chmod(0o644)
        obj.write_bytes(b"not zlib at all")
        before = len(stored_git_events(rig.db))
        try:
            found = await rig.poll()
        except Exception as error:  # a refusal the poll loop logs and retries
            assert "git" in type(error).__module__ or "Git" in type(error).__name__, error
            found = []
        # Nothing half-made is stored: either the correct event or none at all.
        events = stored_git_events(rig.db)[before:]
        assert all(e["commit_id"] == commit for e in events)
        assert len(found) == len(events) <= 1
    finally:
        await rig.close()

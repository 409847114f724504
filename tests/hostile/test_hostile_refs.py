"""Hostile ref names: whatever a repository holds never stops Git activity from being
recorded, and no ref name runs anything in the hooks.

Refs are read by object id (``git cat-file --batch``) or given to git on standard input,
never as one command-line argument per name: a 100 KB tag name made ``git for-each-ref``
crash on every poll, and thousands of names on one command line do not fit.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.hooked import after_sentinel, hooked_repo, wait_for, watching
from tests.gitrepo import Repo


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[tuple[Repo, Path]]:
    """A repository with a `watch` daemon polling it (no hooks)."""
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    repo.commit("base")
    async with watching(repo, state, "--set", "gitPollMs=100"):
        yield repo, state


def pack_tags(repo: Repo, names: list[str]) -> None:
    """Tags as a fetch from a hostile remote leaves them: lines of packed-refs."""
    commit = repo.rev("HEAD")
    with (repo.path / ".git" / "packed-refs").open("a", encoding="utf-8") as handle:
        handle.write("# pack-refs with: peeled fully-peeled sorted \n")
        handle.writelines(f"{commit} refs/tags/{name}\n" for name in sorted(names))


async def test_a_100_kb_tag_name_does_not_stop_the_next_commit(
    watched: tuple[Repo, Path],
) -> None:
    repo, state = watched
    pack_tags(repo, ["v" + "x" * 100_000])
    commit = repo.commit("after the hostile tag")
    events = await wait_for(state, commit, timeout=60)
    assert ("commit", commit) in [(e["event_kind"], e["commit_id"]) for e in events]


async def test_twenty_thousand_new_tags_at_once_do_not_stop_the_next_commit(
    watched: tuple[Repo, Path],
) -> None:
    repo, state = watched
    # 20,000 names of 150 bytes: 3 MB, more than a command line holds.
    pack_tags(repo, [f"release/{i:06d}-" + "y" * 135 for i in range(20_000)])
    commit = repo.commit("after many tags")
    events = await wait_for(state, commit, timeout=300)
    assert ("commit", commit) in [(e["event_kind"], e["commit_id"]) for e in events]


HOSTILE_NAMES = [
    "$(touch${IFS}pwned-1)",
    "`touch${IFS}pwned-2`",
    "a';touch${IFS}pwned-3;'",
    'b";touch${IFS}pwned-4;"',
    "c|touch${IFS}pwned-5",
    "d&&touch${IFS}pwned-6",
    "e>pwned-7",
]


async def test_no_ref_name_runs_anything_in_the_hooks(tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo = hooked_repo(tmp_path / "ws", state)
    for name in HOSTILE_NAMES:
        repo.git("branch", name)
        repo.git("tag", "t" + name)
    for name in HOSTILE_NAMES:
        repo.git("branch", "-D", name)
    events = await after_sentinel(repo, state)
    created = {e["ref_name"] for e in events if e["event_kind"] == "branch_create"}
    deleted = {e["ref_name"] for e in events if e["event_kind"] == "branch_delete"}
    tagged = {e["ref_name"] for e in events if e["event_kind"] == "tag"}
    wanted = {f"refs/heads/{name}" for name in HOSTILE_NAMES}
    assert created == deleted == wanted
    assert tagged == {f"refs/tags/t{name}" for name in HOSTILE_NAMES}
    places = (tmp_path, repo.path, Path(os.sep))  # the hooks run in the worktree, then in /
    assert [found for place in places for found in place.glob("pwned-*")] == []

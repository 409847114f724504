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
from typing import Any

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


# Names git accepts as refs but that read as options, patterns or code wherever a name is put
# on a command line: each must reach the store as the name it is, and run nothing.
OPTION_LIKE = [
    "-d",
    "-",
    "--upload-pack=touch${IFS}pwned-8",
    "--output=pwned-9",
    "--exec=touch${IFS}pwned-10",
    "ünïcødé/分支",
    "@",
    "HEAD",
]
# Names only a hostile repository holds (git refuses to make them): glob characters, a space,
# a colon, as packed-refs lines. They are names like any other: recorded as they are.
UNMAKEABLE = ["v*", "[abc]", "?", "with space", "x:y", "-*"]


def make_hostile_refs(repo: Repo) -> dict[str, str]:
    """Branches and tags under :data:`OPTION_LIKE` names at different commits (the tags
    annotated: read by object id to find their commit); ``{ref: commit}``."""
    made = {}
    for back, name in enumerate(OPTION_LIKE):
        commit = repo.rev(f"HEAD~{back}")
        repo.git("update-ref", f"refs/heads/{name}", commit)
        tag = repo.git("mktag", stdin=annotated(commit)).strip()
        repo.git("update-ref", f"refs/tags/{name}", tag)
        made[f"refs/heads/{name}"] = made[f"refs/tags/{name}"] = commit
    return made


def annotated(commit: str) -> str:
    return (
        f"object {commit}\ntype commit\ntag t\n"
        "tagger Ada Example <ada@example.org> 1767225600 +0000\n\nan annotated tag\n"
    )


def history(repo: Repo) -> None:
    for i in range(12):
        repo.commit(f"c{i}")


def assert_recorded_as_named(events: list[dict[str, Any]], made: dict[str, str]) -> None:
    created = {e["ref_name"]: e["commit_id"] for e in events if e["event_kind"] == "branch_create"}
    tagged = {e["ref_name"]: e["commit_id"] for e in events if e["event_kind"] == "tag"}
    assert {**created, **tagged} == made


async def test_option_like_ref_names_are_recorded_as_named_by_the_hooks(tmp_path: Path) -> None:
    state = tmp_path / "state"
    repo = hooked_repo(tmp_path / "ws", state)
    history(repo)
    made = make_hostile_refs(repo)
    for name in OPTION_LIKE:
        repo.git("update-ref", "-d", f"refs/heads/{name}")
    events = await after_sentinel(repo, state)
    assert_recorded_as_named(events, made)
    deleted = {e["ref_name"] for e in events if e["event_kind"] == "branch_delete"}
    assert deleted == {f"refs/heads/{name}" for name in OPTION_LIKE}
    assert [*tmp_path.rglob("pwned-*"), *Path(os.sep).glob("pwned-*")] == []


async def test_option_like_and_unmakeable_ref_names_do_not_stop_the_poller(
    watched: tuple[Repo, Path],
) -> None:
    repo, state = watched
    history(repo)
    pack_tags(repo, UNMAKEABLE)
    made = {f"refs/tags/{name}": repo.rev("HEAD") for name in UNMAKEABLE}
    made.update(make_hostile_refs(repo))
    commit = repo.commit("after the hostile refs")
    events = await wait_for(state, commit, timeout=60)
    assert ("commit", commit) in [(e["event_kind"], e["commit_id"]) for e in events]
    assert_recorded_as_named([e for e in events if e["ref_name"] in made], made)
    assert [*repo.path.parent.rglob("pwned-*"), *Path(os.sep).glob("pwned-*")] == []

"""Git with mplp-lsp's hooks installed by the real CLI, at script speed, as a user runs it:
ref maintenance is no operation, every commit is stored after its parents, pushes and tags
of commits the graph never saw make nodes whose references resolve, a pull that rebases is
recorded as the merge it is."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.hooked import after_sentinel, hooked_repo, shell, watching, with_a_colleague

Triple = tuple[str, str, str]

HISTORY = (
    "for i in $(seq 1 20); do echo $i >> f; git add f; git commit -qm c$i; done && "
    "git branch b1 && git branch b2 HEAD~3 && git tag v1 && git tag -a v2 -m two HEAD~1"
)


def triples(events: list[dict[str, Any]]) -> list[Triple]:
    return [(e["event_kind"], e["ref_name"], e["commit_id"]) for e in events]


@pytest.mark.parametrize("command", ["git gc -q", "git pack-refs --all", "git repack -adq"])
async def test_ref_maintenance_stores_no_git_event(tmp_path: Path, command: str) -> None:
    state = tmp_path / "state"
    repo = hooked_repo(tmp_path / "ws", state)
    shell(repo, HISTORY)
    before = await after_sentinel(repo, state)
    shell(repo, command)
    after = await after_sentinel(repo, state)
    assert triples(after[len(before) + 1 :]) == []  # nothing between the two sentinels
    # A real deletion afterwards is reported (not dropped as the duplicate of a packing).
    tip = repo.rev("b1")
    repo.git("branch", "-qD", "b1")
    latest = await after_sentinel(repo, state)
    assert triples(latest[len(after) + 1 :]) == [("branch_delete", "refs/heads/b1", tip)]


MERGE_CHAIN = (
    "git checkout -qb f{i} && echo a >> f{i} && git add f{i} && git commit -qm a{i} && "
    "echo b >> f{i} && git commit -qam b{i} && git checkout -q main && "
    "git merge -q --no-ff -m m{i} f{i}"
)
RUNS = 20


@pytest.mark.parametrize("daemon", [False, True], ids=["hooks", "hooks+daemon"])
async def test_each_commit_is_stored_after_its_parents(tmp_path: Path, daemon: bool) -> None:
    state = tmp_path / "state"
    repo = hooked_repo(tmp_path / "ws", state)
    async with contextlib.AsyncExitStack() as stack:
        if daemon:
            await stack.enter_async_context(watching(repo, state))
        for i in range(RUNS):
            shell(repo, MERGE_CHAIN.format(i=i))
        events = await after_sentinel(repo, state)
    made = repo.git("rev-list", "main", "--not", repo.rev("main~" + str(RUNS + 1))).split()
    stored = [e for e in events if e["event_kind"] in ("commit", "merge")]
    assert Counter(e["commit_id"] for e in stored) == Counter(made[1:])  # each once, no extra
    assert stored_before_a_parent(stored) == []


def stored_before_a_parent(stored: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(commit, parent) pairs where the commit's event comes before its parent's."""
    position = {e["commit_id"]: i for i, e in enumerate(stored)}
    return [
        (e["commit_id"], parent)
        for e in stored
        for parent in e["parent_commits"]
        if position.get(parent, -1) > position[e["commit_id"]]
    ]


async def graph_with(state: Path, commit_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """The git part of the PSG once it has applied the event of ``commit_id``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            nodes = graph(state)
        except sqlite3.OperationalError:  # created or migrated right now
            nodes = {"commits": set()}
        if commit_id in nodes["commits"] or time.monotonic() > deadline:
            return nodes
        await asyncio.sleep(0.05)


def graph(state: Path) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{state / 'events.db'}?mode=ro", uri=True)
    try:

        def column(sql: str) -> list[Any]:
            return [row[0] for row in conn.execute(sql)]

        tables = set(column("SELECT name FROM sqlite_master WHERE type = 'table'"))
        return {
            "commits": set(column("SELECT commit_id FROM psg_commits")),
            "authors": dict(
                conn.execute(
                    "SELECT c.commit_id, a.name FROM psg_commits c "
                    "JOIN psg_authors a USING (author_id)"
                ).fetchall()
            ),
            "branches": dict(conn.execute("SELECT ref_name, head_commit FROM psg_branches")),
            "links": set(conn.execute("SELECT commit_id, ref_name FROM psg_commit_branches")),
            "parents": column("SELECT parent_id FROM psg_commit_parents"),
            "tags": dict(conn.execute("SELECT ref_name, commit_id FROM psg_tags"))
            if "psg_tags" in tables
            else {},
        }
    finally:
        conn.close()


async def test_push_and_tag_of_commits_never_seen_give_nodes_that_resolve(
    tmp_path: Path,
) -> None:
    repo, state, other = with_a_colleague(tmp_path)
    # A commit made elsewhere, fetched here: no hook of ours saw it made.
    grace = "--author=Grace Other <grace@example.org>"
    other.git("commit", "-q", "--allow-empty", grace, "-m", "theirs")
    other.git("push", "-q", "origin", "main")
    repo.git("fetch", "-q", "origin")
    theirs = repo.rev("origin/main")
    repo.git("tag", "-a", "v9", "-m", "release nine", theirs)
    # A commit made with the hooks bypassed, then pushed to a new branch.
    repo.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "quiet")
    quiet = repo.rev("HEAD")
    repo.git("push", "-q", "origin", "HEAD:refs/heads/feature")
    events = await after_sentinel(repo, state)
    assert ("tag", "refs/tags/v9", theirs) in triples(events)
    assert ("push", "refs/remotes/origin/feature", quiet) in triples(events)
    nodes = await graph_with(state, events[-1]["commit_id"])
    assert {theirs, quiet} <= nodes["commits"]
    assert nodes["tags"].get("refs/tags/v9") == theirs
    assert nodes["branches"].get("refs/remotes/origin/feature") == quiet
    assert (quiet, "refs/remotes/origin/feature") in nodes["links"]
    assert nodes["authors"].get(theirs) == "Grace Other"  # read from the repository
    # Every reference resolves: branch heads, links, tags and parents are commit nodes.
    referenced = {*nodes["branches"].values(), *nodes["tags"].values(), *nodes["parents"]}
    referenced |= {commit for commit, _ref in nodes["links"]}
    assert referenced - nodes["commits"] == set()


async def test_pull_with_rebase_records_the_replayed_commits_and_its_merge(
    tmp_path: Path,
) -> None:
    repo, state, other = with_a_colleague(tmp_path)
    other.commit("theirs", "theirs.txt")
    other.git("push", "-q", "origin", "main")
    repo.commit("mine", "mine.txt")
    repo.git("pull", "-q", "--rebase", "origin", "main")
    replayed = repo.rev("HEAD")
    events = await after_sentinel(repo, state)
    assert ("commit", "refs/heads/main", replayed) in triples(events)
    assert ("merge", "refs/heads/main", replayed) in triples(events)


# Git commands that move, rewrite or drop refs without a branch being created or deleted:
# (setup, command). Each stores only the commits it makes (a rebase's and am's replayed
# commits, a replayed merge as a merge); none stores a branch or tag event.
REF_MOVERS = {
    "fetch --prune": (
        "git -C ../other checkout -qb gone && git -C ../other commit -q --allow-empty -m g && "
        "git -C ../other push -q origin gone && git fetch -q && "
        "git -C ../other push -q origin --delete gone",
        "git fetch -q --prune && git remote prune origin",
    ),
    "rebase": (
        "git checkout -qb topic main~5 && for i in 1 2 3; do echo $i >> t; git add t; "
        "git commit -qm t$i; done && git checkout -q main",
        "git rebase -q main topic && git checkout -q main",
    ),
    "rebase --rebase-merges": (
        "git checkout -qb topic main~5 && git checkout -qb side && echo s > s && git add s && "
        "git commit -qm s && git checkout -q topic && echo t > t && git add t && "
        "git commit -qm t && git merge -q --no-ff -m joined side && git branch -qD side && "
        "git checkout -q main",
        "git rebase -q --rebase-merges main topic && git checkout -q main",
    ),
    "am": (
        "git checkout -qb topic main~5 && for i in 1 2 3; do echo $i >> t; git add t; "
        "git commit -qm t$i; done && git format-patch -q -3 -o ../patches && "
        "git checkout -q main && git branch -qD topic",
        "git am -q ../patches/*.patch",
    ),
    "stash": ("true", "echo x >> f && git stash -q && git stash pop -q && git checkout -q f"),
    "bisect": (
        "true",
        "git bisect start HEAD HEAD~10 >/dev/null && git bisect reset >/dev/null 2>&1",
    ),
    "notes and replace": (
        "true",
        "git notes add -m n HEAD && git replace -f HEAD~1 HEAD~2 && git replace -d HEAD~1",
    ),
}


@pytest.mark.parametrize("case", list(REF_MOVERS))
async def test_commands_that_move_refs_invent_no_branch_event(tmp_path: Path, case: str) -> None:
    setup, command = REF_MOVERS[case]
    repo, state, _other = with_a_colleague(tmp_path)
    shell(repo, HISTORY + " && " + setup)
    before = await after_sentinel(repo, state)
    tips = repo.git("for-each-ref", "--format=%(objectname)", "refs/heads").split()
    shell(repo, command)
    after = await after_sentinel(repo, state)
    made = repo.git("rev-list", "--branches", "--not", *tips).split()
    made.remove(repo.rev("HEAD"))  # the sentinel
    between = after[len(before) + 1 :]
    assert [t for t in triples(between) if t[0] not in ("commit", "merge")] == []
    assert Counter(e["commit_id"] for e in between) == Counter(made)  # each once
    assert stored_before_a_parent(between) == []

"""The Git source against real repositories: each operation yields exactly its git_events,
through the poller and through the hook, with and without a daemon owning the store."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from mplp_lsp.sources import git as git_source
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs import hooks
from mplp_lsp.vcs.hook_names import FALLBACK_HOOKS, HOOK_NAMES
from mplp_lsp.vcs.repo import GitRepo, RepoRefused
from tests.gitrepo import BASE_ENV, Repo
from tests.support.git_history import (
    Rig,
    Triple,
    assert_valid,
    install_hooks,
    scenario,
    stored_git_events,
    subprocess_git,
    triples,
    wait_for_count,
)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    state = tmp_path / "state"
    state.mkdir()
    made = Rig(Repo.create(tmp_path / "ws"), state)
    await made.open()
    yield made
    await made.close()


async def test_each_operation_polled(rig: Rig) -> None:
    for name, step in scenario():
        expected = step(rig.repo)
        assert await rig.poll() == expected, name
    assert await rig.poll() == []
    assert_valid(stored_git_events(rig.db))


async def test_each_operation_through_the_hook_without_a_daemon(tmp_path: Path) -> None:
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    state.mkdir()
    install_hooks(repo, state)
    total: list[Triple] = []
    for name, step in scenario():
        total += step(repo)
        events = await wait_for_count(state / "events.db", len(total))
        # Hook processes run in the background and may finish in any order.
        assert sorted(triples(events)) == sorted(total), name
    # The daemon starting later finds nothing new: the hook recorded what it reported.
    rig = Rig(repo, state)
    await rig.open()
    try:
        await rig.source.poll()
        repo.commit("after")
        assert await rig.poll() == [("commit", "refs/heads/main", repo.rev("HEAD"))]
    finally:
        await rig.close()
    assert_valid(stored_git_events(state / "events.db"))


# What only reference-transaction sees: no other hook runs for these operations.
ONLY_IN_TRANSACTIONS = {"branch create", "light and annotated tag", "branch delete"}


async def test_each_operation_through_the_other_five_hooks(tmp_path: Path) -> None:
    """Without reference-transaction (git < 2.28, or removed), post-commit, post-merge,
    post-rewrite, post-checkout and pre-push report what they know, and nothing else."""
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    state.mkdir()
    install_hooks(repo, state, needed=FALLBACK_HOOKS)  # as for a git before 2.28
    total: list[Triple] = []
    for name, step in scenario():
        expected = step(repo)
        if name == "commit on a branch":
            # `git branch feature` went unreported; its first checkout shows the creation.
            expected.insert(0, ("branch_create", "refs/heads/feature", repo.rev("feature~1")))
        if name not in ONLY_IN_TRANSACTIONS:
            total += expected
        events = await wait_for_count(state / "events.db", len(total))
        assert sorted(triples(events)) == sorted(total), name
    await asyncio.sleep(1.0)  # a late hook process would add something now
    assert sorted(triples(stored_git_events(state / "events.db"))) == sorted(total)
    assert_valid(stored_git_events(state / "events.db"))


async def test_pre_push_reports_only_a_push_that_happened(tmp_path: Path) -> None:
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    state.mkdir()
    remote = tmp_path / "remote.git"
    subprocess_git(["init", "-q", "--bare", str(remote)])
    repo.git("remote", "add", "origin", str(remote))
    repo.commit("one")
    repo.git("push", "-q", "origin", "main")
    install_hooks(repo, state, needed=("pre-push",))
    hook_dir = repo.path / ".git" / "hooks"
    # Someone else pushed meanwhile: ours is refused by the remote.
    other = Repo(tmp_path / "other")
    subprocess_git(["clone", "-q", "-b", "main", str(remote), str(other.path)])
    other.commit("theirs", "theirs.txt")
    other.git("push", "-q", "origin", "main")
    repo.commit("two")
    with pytest.raises(subprocess.CalledProcessError):
        repo.git("push", "-q", "origin", "main")
    # A pre-push hook of the user's vetoes the next attempt: the push never happens.
    vetoing = hook_dir / ("pre-push" + hooks.CHAINED_SUFFIX)
    vetoing.write_text("#!/bin/sh\nexit 1\n")
    vetoing.chmod(0o755)
    repo.git("fetch", "-q", "origin")
    repo.git("rebase", "-q", "origin/main")
    with pytest.raises(subprocess.CalledProcessError):
        repo.git("push", "-q", "origin", "main")
    vetoing.unlink()
    repo.git("push", "-q", "origin", "main")
    events = await wait_for_count(state / "events.db", 1)
    await asyncio.sleep(1.5)  # the refused attempts' background checks are long done
    assert triples(stored_git_events(state / "events.db")) == [
        ("push", "refs/remotes/origin/main", repo.rev("main"))
    ]
    assert_valid(events)


async def test_hook_and_daemon_report_each_operation_once(tmp_path: Path) -> None:
    repo, state = Repo.create(tmp_path / "ws"), tmp_path / "state"
    install_hooks(repo, state)
    settings = Settings(git_poll_ms=0)  # only the hook delivers, through the daemon's inbox
    workspace = await Workspace.open(repo.path, settings, state_dir=state)
    try:
        total: list[Triple] = []
        for name, step in scenario():
            total += step(repo)
            events = await wait_for_count(workspace.paths.database, len(total))
            assert sorted(triples(events)) == sorted(total), name
            # The poller now sees the same operation: every payload is a duplicate.
            assert await workspace.git.poll() == 0, name
        await workspace.bus.drain()
        assert len(stored_git_events(workspace.paths.database)) == len(total)
    finally:
        await workspace.close()


async def test_catch_up_of_100_commits_once(rig: Rig) -> None:
    rig.repo.commit("base")
    await rig.poll()
    await rig.close()
    made = [rig.repo.commit(f"c{i}") for i in range(100)]
    await rig.open()
    events = stored_git_events(rig.db)[2:]
    assert triples(events) == [("commit", "refs/heads/main", c) for c in made]
    await rig.close()
    await rig.open()
    assert len(stored_git_events(rig.db)) == 102
    assert await rig.poll() == []


async def test_first_start_records_a_baseline(rig: Rig, tmp_path: Path) -> None:
    rig.repo.commit("history")
    other = Rig(rig.repo, tmp_path / "other")
    other.state.mkdir()
    await other.open()
    try:
        assert stored_git_events(other.db) == []
        assert await other.poll() == []
    finally:
        await other.close()


CANARY = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


async def test_redaction_credentials_and_email_hash(rig: Rig) -> None:
    rig.repo.commit("base")
    await rig.poll()
    rig.repo.git("remote", "add", "origin", "https://ada:s3cretpass@git.example.org/team/app.git")
    rig.repo.commit(f"deploy with token {CANARY}")
    await rig.poll()
    [payload] = stored_git_events(rig.db)[-1:]
    assert CANARY not in str(payload)
    assert payload["commit_message"].startswith("deploy with token ")
    assert payload["repo_url"] == "https://git.example.org/team/app.git"
    assert "s3cretpass" not in rig.db.read_bytes().decode("latin-1")
    assert payload["author_email"].endswith("@hashed.invalid")
    assert "ada@example.org" not in str(payload)


async def test_email_policies(tmp_path: Path) -> None:
    seen = {}
    for policy in ("keep", "drop"):
        state = tmp_path / policy
        state.mkdir()
        rig = Rig(Repo.create(tmp_path / f"ws-{policy}"), state)
        await rig.open(email_policy=policy)
        try:
            rig.repo.commit("one")
            await rig.poll()
            seen[policy] = stored_git_events(rig.db)[-1].get("author_email")
        finally:
            await rig.close()
    assert seen == {"keep": "ada@example.org", "drop": None}


async def test_psg_commit_records(rig: Rig) -> None:
    for _name, step in scenario()[:14]:
        step(rig.repo)
        await rig.poll()

    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        def rows(sql: str) -> list[Any]:
            return conn.execute(sql).fetchall()

        return {
            "commits": rows("SELECT count(*) FROM psg_commits")[0][0],
            "authors": rows("SELECT count(*) FROM psg_authors")[0][0],
            "branches": sorted(r[0] for r in rows("SELECT ref_name FROM psg_branches")),
            "merge_parents": rows(
                "SELECT count(*) FROM psg_commit_parents p JOIN psg_commits c USING (commit_id) "
                "WHERE c.message = 'Merge feature'"
            )[0][0],
            "orphans": rows("PRAGMA foreign_key_check"),
        }

    graph = await rig.writer.read(read)
    assert graph["branches"] == ["refs/heads/feature", "refs/heads/main"]  # topic deleted
    assert graph["authors"] == 1
    assert graph["merge_parents"] == 2
    assert graph["orphans"] == []
    updates = await rig.writer.read(lambda c: EventLog(c).query(kinds=["graph_update"]))
    types = {u.envelope["event_type"] for u in updates}
    assert {"commit_node_added", "branch_node_added", "author_node_added"} <= types
    assert "branch_node_removed" in types
    for update in updates:
        assert validate(Kind.GRAPH_UPDATE, update.envelope).ok


async def test_detached_head_commit_and_empty_repository(rig: Rig) -> None:
    assert await rig.poll() == []  # an empty repository: nothing to say, no error
    rig.repo.commit("one")
    await rig.poll()
    rig.repo.git("checkout", "-q", "--detach")
    assert await rig.poll() == []
    detached = rig.repo.commit("on a detached HEAD")
    assert await rig.poll() == [("commit", "HEAD", detached)]


async def test_no_poll_reports_the_middle_of_a_rebase(rig: Rig) -> None:
    rig.repo.commit("one")
    await rig.poll()
    rig.repo.git("checkout", "-q", "--detach")
    await rig.poll()
    rebase_state = rig.repo.path / ".git" / "rebase-merge"
    rebase_state.mkdir()  # what git keeps while a rebase replays commits
    replayed = rig.repo.commit("replayed mid-rebase")
    assert await rig.poll() == []
    rebase_state.rmdir()
    assert await rig.poll() == [("commit", "HEAD", replayed)]


async def test_a_rebase_that_begins_while_a_poll_starts_is_not_reported(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.repo.commit("one")
    await rig.poll()
    rig.repo.git("checkout", "-q", "--detach")
    await rig.poll()
    (rig.repo.path / ".git" / "rebase-merge").mkdir()
    replayed = rig.repo.commit("replayed mid-rebase")
    # The poll's first look finds no rebase (it began just after); its read happens during it.
    real, looks = git_source._rebase_in_progress, []

    def first_look_misses(git_dir: Path) -> bool:
        looks.append(git_dir)
        return len(looks) > 1 and real(git_dir)

    monkeypatch.setattr(git_source, "_rebase_in_progress", first_look_misses)
    assert await rig.poll() == []
    (rig.repo.path / ".git" / "rebase-merge").rmdir()
    assert await rig.poll() == [("commit", "HEAD", replayed)]


def test_repository_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the repository another owner")
    repo = Repo.create(tmp_path / "theirs")
    for path in [repo.path, *repo.path.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    with pytest.raises(RepoRefused, match="ownership"):
        GitRepo.open(repo.path)


def test_hooks_chain_keep_status_and_uninstall_restores(tmp_path: Path) -> None:
    repo = Repo.create(tmp_path / "ws")
    custom = tmp_path / "my-hooks"
    custom.mkdir()
    repo.git("config", "core.hooksPath", str(custom))
    theirs = custom / "reference-transaction"
    original = (
        b'#!/bin/sh\necho "$1" >> "$(dirname "$0")/seen"\ncat >> "$(dirname "$0")/seen"\nexit 0\n'
    )
    theirs.write_bytes(original)
    theirs.chmod(0o750)
    install_hooks(repo, tmp_path / "state")
    assert hooks.MARKER_LINE in theirs.read_text()
    repo.commit("one")
    seen = (custom / "seen").read_text()
    assert "prepared" in seen and "committed" in seen and "refs/heads/main" in seen
    # The user's hook can still veto a transaction: its exit status is the hook's.
    chained = Path(str(theirs) + hooks.CHAINED_SUFFIX)
    chained.write_bytes(b'#!/bin/sh\n[ "$1" = prepared ] && exit 1\nexit 0\n')
    with pytest.raises(subprocess.CalledProcessError):
        repo.git("branch", "vetoed")
    assert not (repo.path / ".git" / "refs" / "heads" / "vetoed").exists()
    chained.write_bytes(original)
    opened = GitRepo.open(repo.path)
    try:
        states = hooks.uninstall(opened)
    finally:
        opened.close()
    assert theirs.read_bytes() == original and theirs.stat().st_mode & 0o777 == 0o750
    assert [(s.name, s.state, s.chained) for s in states] == [
        (name, "foreign" if name == "reference-transaction" else "absent", False)
        for name in HOOK_NAMES
    ]


def test_state_paths_have_an_inbox(tmp_path: Path) -> None:
    assert StatePaths(tmp_path).inbox == tmp_path / "inbox"


async def test_a_branch_merged_and_deleted_between_polls(rig: Rig) -> None:
    """The poller sees t5 created, then (next poll) gone and main moved: the deletion is
    reported at the tip t5 had when it went (where HEAD left it), as the hooks report it,
    and the fast-forward as a merge beside the commit it brought."""
    base = rig.repo.commit("base")
    await rig.poll()
    rig.repo.git("checkout", "-q", "-b", "t5")
    assert await rig.poll() == [("branch_create", "refs/heads/t5", base)]
    c = rig.repo.commit("c")
    rig.repo.git("checkout", "-q", "main")
    rig.repo.git("merge", "-q", "--ff-only", "t5")
    rig.repo.git("branch", "-q", "-d", "t5")
    assert sorted(await rig.poll()) == [
        ("branch_delete", "refs/heads/t5", c),
        ("commit", "refs/heads/main", c),
        ("merge", "refs/heads/main", c),
    ]


async def test_a_commit_and_a_branch_made_at_it_in_the_same_second(rig: Rig) -> None:
    """Reflog times are whole seconds: a commit on main and a ``checkout -b`` of a branch
    that sorts before main, in the same second, tie. The commit is reported all the same
    (it was missed once in a soak without hooks)."""
    rig.repo.commit("base")
    await rig.poll()
    in_one_second(
        rig.repo, "echo x >> f && git add f && git commit -qm tie && git checkout -qb aaa"
    )
    made = rig.repo.rev("HEAD")
    assert await rig.poll() == [
        ("commit", "refs/heads/main", made),
        ("branch_create", "refs/heads/aaa", made),
    ]


def in_one_second(repo: Repo, script: str) -> None:
    """``script`` with one fixed clock: every reflog entry it writes has the same time."""
    same = {"GIT_AUTHOR_DATE": "1767400000 +0000", "GIT_COMMITTER_DATE": "1767400000 +0000"}
    env = {**os.environ, **BASE_ENV, **same}
    subprocess.run(["sh", "-c", script], cwd=repo.path, env=env, check=True)

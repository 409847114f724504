"""Repositories that already have history (real git), the hooks installed, and the git events a store recorded."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mplp_lsp.engine.bus import EventBus
from mplp_lsp.engine.intake import Intake
from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.graph.commits import CommitGraph
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from mplp_lsp.sources.git import GitSource
from mplp_lsp.store.database import connect
from mplp_lsp.store.errorlog import IntegrationErrorLog
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.writer import StoreWriter
from mplp_lsp.vcs import hooks
from mplp_lsp.vcs.repo import GitRepo
from tests.gitrepo import Repo

Triple = tuple[str, str, str]  # (event_kind, ref_name, commit_id)


def stored_git_events(db: Path) -> list[dict[str, Any]]:
    conn = connect(db, read_only=True)
    try:
        return [e.envelope["payload"] for e in EventLog(conn).query(kinds=["git"])]
    finally:
        conn.close()


def triples(payloads: list[dict[str, Any]]) -> list[Triple]:
    return [(p["event_kind"], p["ref_name"], p["commit_id"]) for p in payloads]


class Rig:
    """A store with the Git source and the PSG consumer, polled by hand (no timing)."""

    def __init__(self, repo: Repo, state: Path) -> None:
        self.repo, self.state = repo, state
        self.db = state / "events.db"

    async def open(self, **settings: Any) -> None:
        self.writer = StoreWriter(self.db)
        await self.writer.start()
        self.bus = EventBus()
        self.intake = Intake(
            self.writer, self.bus, IntegrationErrorLog(self.state / "e.jsonl"), root=self.repo.path
        )
        self.bus.subscribe("psg", CommitGraph(self.writer, self.intake).handle, kinds={"git"})
        self.source = GitSource(
            self.repo.path,
            self.writer,
            self.intake,
            poll_interval=0,
            email_policy=settings.get("email_policy", "hash"),
        )
        await self.source.start()

    async def poll(self) -> list[Triple]:
        before = len(stored_git_events(self.db))
        await self.source.poll()
        await self.bus.drain()
        await self.bus.drain()
        return triples(stored_git_events(self.db)[before:])

    async def close(self) -> None:
        await self.source.close()
        await self.bus.close()
        await self.writer.close()


Step = tuple[str, Callable[[Repo], list[Triple]]]


def scenario() -> list[Step]:
    """Operations on a fresh repository, each with the events it must produce.

    ``origin`` is set from the start (the bare repository is made by the push step):
    ``repo_url`` is part of every payload, and a hook process still running for one step
    must not see the remote that a later step adds (docs/git.md, "Limits").
    """

    def initial(r: Repo) -> list[Triple]:
        r.git("remote", "add", "origin", str(r.path.parent / "remote.git"))
        c = r.commit("one")
        return [("branch_create", "refs/heads/main", c), ("commit", "refs/heads/main", c)]

    def commit(r: Repo) -> list[Triple]:
        return [("commit", "refs/heads/main", r.commit("two"))]

    def amend(r: Repo) -> list[Triple]:
        r.git("commit", "-q", "--amend", "-m", "two, amended")
        return [("commit", "refs/heads/main", r.rev("HEAD"))]

    def branch(r: Repo) -> list[Triple]:
        r.git("branch", "feature")
        return [("branch_create", "refs/heads/feature", r.rev("main"))]

    def on_feature(r: Repo) -> list[Triple]:
        r.git("checkout", "-q", "feature")
        return [("commit", "refs/heads/feature", r.commit("f1", "f.txt"))]

    def merge_ff(r: Repo) -> list[Triple]:
        r.git("checkout", "-q", "main")
        r.git("merge", "-q", "--ff-only", "feature")
        return [("merge", "refs/heads/main", r.rev("main"))]

    def main_ahead(r: Repo) -> list[Triple]:
        r.git("checkout", "-q", "feature")
        f2 = r.commit("f2", "f.txt")
        r.git("checkout", "-q", "main")
        m3 = r.commit("m3")
        return [("commit", "refs/heads/feature", f2), ("commit", "refs/heads/main", m3)]

    def merge_commit(r: Repo) -> list[Triple]:
        r.git("merge", "-q", "--no-ff", "-m", "Merge feature", "feature")
        return [("merge", "refs/heads/main", r.rev("main"))]

    def topic(r: Repo) -> list[Triple]:
        r.git("checkout", "-q", "-b", "topic")
        return [("branch_create", "refs/heads/topic", r.rev("main"))]

    def topic_commits(r: Repo) -> list[Triple]:
        t1, t2 = r.commit("t1", "t.txt"), r.commit("t2", "t.txt")
        return [("commit", "refs/heads/topic", t1), ("commit", "refs/heads/topic", t2)]

    def main_again(r: Repo) -> list[Triple]:
        r.git("checkout", "-q", "main")
        return [("commit", "refs/heads/main", r.commit("m4"))]

    def rebase(r: Repo) -> list[Triple]:
        r.git("rebase", "-q", "main", "topic")
        return [
            ("commit", "refs/heads/topic", r.rev("topic~1")),
            ("commit", "refs/heads/topic", r.rev("topic")),
        ]

    def tags(r: Repo) -> list[Triple]:
        r.git("checkout", "-q", "main")
        r.git("tag", "v1")
        r.git("tag", "-a", "v2", "-m", "release two", "topic")
        return [("tag", "refs/tags/v1", r.rev("main")), ("tag", "refs/tags/v2", r.rev("topic"))]

    def delete(r: Repo) -> list[Triple]:
        tip = r.rev("topic")
        r.git("branch", "-q", "-D", "topic")
        return [("branch_delete", "refs/heads/topic", tip)]

    def push(r: Repo) -> list[Triple]:
        subprocess_git(["init", "-q", "--bare", str(r.path.parent / "remote.git")])
        r.git("push", "-q", "origin", "main")
        return [("push", "refs/remotes/origin/main", r.rev("main"))]

    return [
        ("initial commit", initial),
        ("commit", commit),
        ("amend", amend),
        ("branch create", branch),
        ("commit on a branch", on_feature),
        ("fast-forward merge", merge_ff),
        ("commits on two branches", main_ahead),
        ("merge commit", merge_commit),
        ("branch create with checkout -b", topic),
        ("two commits", topic_commits),
        ("commit on main", main_again),
        ("rebase", rebase),
        ("light and annotated tag", tags),
        ("branch delete", delete),
        ("push to a bare remote", push),
    ]


def subprocess_git(args: list[str]) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def assert_valid(payloads: list[dict[str, Any]]) -> None:
    for payload in payloads:
        assert validate(Kind.GIT, payload).ok, payload


async def wait_for_count(db: Path, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            events = stored_git_events(db)
        except (FileNotFoundError, sqlite3.OperationalError):  # not created (or migrated) yet
            events = []
        if len(events) >= count or time.monotonic() > deadline:
            return events
        await asyncio.sleep(0.05)


def install_hooks(repo: Repo, state: Path, needed: tuple[str, ...] | None = None) -> None:
    """The hooks this git needs (``needed``: those, as for another git)."""
    opened = GitRepo.open(repo.path)
    try:
        hooks.install(opened, repo.path, StatePaths(state), needed=needed)
    finally:
        opened.close()

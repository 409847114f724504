"""A workstation whose clock runs an hour ahead does not freeze the team graph.

A real ``watch`` daemon runs under Debian's ``faketime`` one hour ahead and records a
change to a file; the collector receives it with a time an hour in the future. The clock
is then put right (a daemon on the real clock, same workspace and store) and the file
changes again: the team graph must show that newer change at once, not keep the future one
until the wall clock catches up. The future time is clamped to when it was received and
flagged, and the stream shows how far ahead its clock was.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import postgres
from tests.gitrepo import Repo
from tests.required import unavailable
from tests.support.team import get
from tests.support.waiting import wait_until_async
from tests.team.conftest import TOKEN, start_collector

pytestmark = pytest.mark.e2e

REPO_URL = "https://git.example.org/team/clock.git"


def faketime_library() -> Path:
    """Debian's libfaketime for multithreaded programs (package faketime)."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    if not found:
        unavailable("faketime is not installed (apt-get install faketime)")
    return found[0]


def file_row(
    cluster: postgres.Cluster, db_url: str, path: str, *flags: str
) -> dict[str, Any] | None:
    """The team graph's row of ``path``: its time and cause, and the ``flags`` asked for
    (``f.clamped``, ``s.clock_ahead_ms``, ``s.clamped``)."""
    with psycopg.connect(cluster.psql_url(db_url.rsplit("/", 1)[1])) as conn:
        columns = ", ".join(("f.modified_at", "f.cause", *flags))
        row = conn.execute(
            f"SELECT {columns} FROM team_files f JOIN streams s USING (stream)"
            " WHERE f.path = %s".encode(),
            (path,),
        ).fetchone()
    return None if row is None else dict(zip(("modified_at", "cause", *flags), row, strict=True))


def event_ids(cluster: postgres.Cluster, db_url: str) -> set[str]:
    with psycopg.connect(cluster.psql_url(db_url.rsplit("/", 1)[1])) as conn:
        return {row[0] for row in conn.execute("SELECT event_id FROM events")}


async def test_a_clock_an_hour_ahead_does_not_freeze_the_team_graph(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.e2e.harness import watch_argv
    from tests.support.daemon import stop, wait_for_api

    library = faketime_library()
    workspace, state = tmp_path / "ws", tmp_path / "state"
    repo = Repo.create(workspace)
    repo.git("remote", "add", "origin", REPO_URL)
    repo.commit("first", name="README.md")
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    notes = workspace / "notes.txt"
    try:
        # libfaketime in the daemon itself (the faketime program would stand between the
        # test and the daemon as a parent process): every clock it reads is an hour ahead.
        ahead = await asyncio.create_subprocess_exec(
            *watch_argv(workspace, state, "--remote", collector.url),
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "LD_PRELOAD": str(library), "FAKETIME": "+1h"},
        )
        try:
            await wait_for_api(state, workspace)
            notes.write_text("written while the clock is an hour ahead\n")
            repo.commit("second", name="README.md")  # ties the stream to the repository

            async def future_change_in() -> bool:
                return file_row(pg_cluster, pg_url, "notes.txt") is not None

            await wait_until_async(future_change_in)
        finally:
            await stop(ahead)
        future = file_row(pg_cluster, pg_url, "notes.txt")
        assert future is not None
        seen = event_ids(pg_cluster, pg_url)
        try:  # checked at the end: first what users see, the frozen graph or not
            ahead_flags = file_row(pg_cluster, pg_url, "notes.txt", "f.clamped", "s.clock_ahead_ms")
        except psycopg.errors.UndefinedColumn:
            ahead_flags = None

        right = await asyncio.create_subprocess_exec(
            *watch_argv(workspace, state, "--remote", collector.url),
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await wait_for_api(state, workspace)
            notes.write_text("written after the clock was put right\n")

            async def real_change_shown() -> bool:
                row = file_row(pg_cluster, pg_url, "notes.txt")
                return row is not None and row["cause"] not in seen

            await wait_until_async(real_change_shown, timeout=60)
        finally:
            await stop(right)
        status, graph = await get(collector.url, f"/repository?repo_url={REPO_URL}")
    finally:
        collector.stop()
    assert status == 200
    [shown] = [f for f in graph["files"] if f["path"] == "notes.txt"]
    changed = datetime.fromisoformat(shown["last_modified"].replace("Z", "+00:00"))
    # The real change, at its real time: nothing an hour ahead is left in front of it.
    assert changed - datetime.now(UTC) < timedelta(minutes=1)
    assert changed > future["modified_at"]
    # The future time was clamped to its receipt and flagged; the stream said how far
    # ahead its clock was until it was put right.
    assert future["modified_at"] <= datetime.now(UTC)
    flags = ("f.clamped", "s.clock_ahead_ms", "s.clamped")
    current = file_row(pg_cluster, pg_url, "notes.txt", *flags)
    assert current is not None and not current["f.clamped"] and current["s.clamped"] > 0
    assert current["s.clock_ahead_ms"] is None  # the clock is right again
    assert ahead_flags is not None and ahead_flags["f.clamped"]
    assert ahead_flags["s.clock_ahead_ms"] > 55 * 60 * 1000

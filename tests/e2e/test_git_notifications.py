"""Editor notifications under .git make the Git source poll at once (pytest-lsp, real server)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsprotocol import types

from tests.e2e.harness import lsp_session, plain
from tests.gitrepo import Repo


async def test_watched_git_files_trigger_a_poll(workspace: Path, state_dir: Path) -> None:
    repo = Repo(workspace)
    # Polling off: only the notification can make the server look at the repository.
    async with lsp_session(workspace, state_dir, settings={"gitPollMs": 0}) as session:
        [registration] = [
            r for r in session.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        ]
        options = plain(registration.register_options)
        globs = {watcher["globPattern"] for watcher in options["watchers"]}
        assert {
            "**/.git/HEAD",
            "**/.git/refs/**",
            "**/.git/packed-refs",
            "**/.git/logs/**",
        } <= globs
        commit = repo.commit("one")
        await asyncio.sleep(0.5)
        assert session.events("git") == []  # nothing polled by itself
        session.client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[
                    types.FileEvent(
                        uri=session.uri(".git/refs/heads/main"), type=types.FileChangeType.Created
                    ),
                    types.FileEvent(
                        uri=session.uri(".git/logs/HEAD"), type=types.FileChangeType.Changed
                    ),
                ]
            )
        )
        deadline = time.monotonic() + 20
        while not session.events("git") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        events = await session.wait_for_events(1, "git")
    # the repository's main branch existed already: one commit on it
    assert [(e["payload"]["event_kind"], e["payload"]["commit_id"]) for e in events] == [
        ("commit", commit),
    ]
    assert session.events("file_update") == []  # .git itself is never a file event

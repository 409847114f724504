"""The parts a Workspace is made of, each built from the settings and tested alone:
LiveIgnore (the ignore rules as they are now) and FileActivity (raw reports to file_update
submissions), with a real store and no StoreOwner, Git source or drift monitor."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mplp_lsp.config.live import Debounce, Ignore
from mplp_lsp.file_activity import FileActivity
from mplp_lsp.intake import Submission
from mplp_lsp.live_ignore import LiveIgnore
from mplp_lsp.settings import Settings
from mplp_lsp.sources.debounce import Change
from mplp_lsp.store.writer import StoreWriter


def test_live_ignore_follows_exclude_and_gitignore_changes(tmp_path: Path) -> None:
    ignore = LiveIgnore(tmp_path, ["build/"], internal_dirs=[tmp_path / "state"])
    assert ignore.is_ignored("build/out.o") and ignore.is_ignored("state/events.db")
    assert not ignore.is_ignored("src/a.py")
    ignore.excludes_changed(Ignore(exclude=("src/",)))
    assert (ignore.is_ignored("src/a.py"), ignore.is_ignored("build/out.o")) == (True, False)
    assert ignore.fresh().is_ignored("src/a.py")  # a thread's copy has the new excludes
    (tmp_path / ".gitignore").write_text("*.log\n")
    ignore.gitignore_changed(".gitignore")
    assert ignore.is_ignored("x.log")
    assert ignore.current_epoch() == 2


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[StoreWriter]:
    store = StoreWriter(tmp_path / "events.db")
    await store.start()
    yield store
    await store.close()


async def activity(
    tmp_path: Path, writer: StoreWriter, settings: Settings
) -> tuple[FileActivity, list[Submission], list[str]]:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    submitted: list[Submission] = []
    git: list[str] = []

    async def submit(batch: list[Submission]) -> None:
        submitted.extend(batch)

    ignore = LiveIgnore(root, settings.exclude, internal_dirs=[])
    files = FileActivity(
        root, settings, writer, submit, ignore, git_activity=lambda: git.append("x")
    )
    return files, submitted, git


async def test_file_activity_settles_reports_into_submissions(
    tmp_path: Path, writer: StoreWriter
) -> None:
    settings = Settings(debounce_ms=10, exclude=("build/",))
    files, submitted, git = await activity(tmp_path, writer, settings)
    (files.root / "a.py").write_text("x\n")
    assert files.observe(Change.CREATED, "a.py")
    assert files.observe(Change.MODIFIED, "a.py")  # one quiet period: one event
    assert not files.observe(Change.CREATED, "build/out.o")
    assert not files.observe(Change.MODIFIED, ".git/HEAD")  # Git is told; no file event
    await files.close()
    paths = [(s.data["file_path"], s.data["change_type"]) for s in submitted]
    assert ("a.py", "created") in paths and not any(p.startswith("build/") for p, _ in paths)
    assert files.ignored == 2 and git == ["x"]


async def test_a_new_quiet_period_takes_over_and_the_old_one_delivers(
    tmp_path: Path, writer: StoreWriter
) -> None:
    slow = Settings(debounce_ms=60_000, max_wait_ms=600_000)
    files, submitted, _ = await activity(tmp_path, writer, slow)
    (files.root / "slow.py").write_text("x\n")
    files.observe(Change.CREATED, "slow.py")
    old = files.debouncer
    files.settings = Settings(debounce_ms=10)
    files.debounce_changed(Debounce(debounce_ms=10, max_wait_ms=2000))
    assert files.debouncer is not old
    deadline = asyncio.get_running_loop().time() + 30
    while not submitted and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert [s.data["file_path"] for s in submitted] == ["slow.py"]  # the old one flushed it
    await files.close()

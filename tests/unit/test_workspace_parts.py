"""The parts a Workspace is made of, each built from the settings and tested alone:
LiveIgnore (the ignore rules as they are now) and FileActivity (raw reports to file_update
submissions, the start-up catch-up with the graph's baseline, the comparisons after lost
reports), with a real store, a real Git repository and no StoreOwner, Git source or drift
monitor."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.config.live import Debounce, Ignore
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine import file_activity, file_rescan
from mplp_lsp.engine.file_activity import FileActivity
from mplp_lsp.engine.file_catch_up import CatchUp
from mplp_lsp.engine.intake import Submission
from mplp_lsp.graph.content_hash import git_blob, safe_hash
from mplp_lsp.ignore.live import LiveIgnore
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sources.debounce import WATCHER, Change
from mplp_lsp.store.writer import StoreWriter
from tests.gitrepo import Repo
from tests.support.calls import counted
from tests.support.waiting import wait_until_async


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
    tmp_path: Path,
    writer: StoreWriter,
    settings: Settings,
    busy: Any = contextlib.nullcontext,
) -> tuple[FileActivity, list[Submission], list[str]]:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    submitted: list[Submission] = []
    git: list[str] = []

    async def submit(batch: list[Submission]) -> None:
        submitted.extend(batch)

    ignore = LiveIgnore(root, settings.exclude, internal_dirs=[])
    catch_up = CatchUp(root, writer, submit, ignore.fresh, snapshot_cap=lambda: 0)
    files = FileActivity(
        root,
        settings,
        writer,
        submit,
        ignore,
        catch_up=catch_up,
        git_activity=lambda: git.append("x"),
        busy=busy,
    )
    return files, submitted, git


def nodes(conn: sqlite3.Connection) -> dict[str, tuple[int | None, str | None]]:
    rows = conn.execute("SELECT path, size, content_hash FROM psg_files")
    return {path: (size, digest) for path, size, digest in rows}


async def test_the_catch_up_learns_every_file_there_with_one_graph_update(
    tmp_path: Path, writer: StoreWriter
) -> None:
    repo = Repo.existing(tmp_path / "ws")
    (repo.path / "src" / "util.py").write_text("changed in the worktree, not staged\n")
    files, submitted, _ = await activity(tmp_path, writer, Settings(debounce_ms=10))
    await files.catch_up(time.time_ns(), time.time_ns())
    learnt = await writer.read(nodes)
    assert set(learnt) == repo.files()
    [baseline] = submitted
    assert (baseline.kind, baseline.data["update_kind"]) == (Kind.GRAPH_UPDATE, "bulk")
    assert baseline.data["node_delta"] == len(repo.files())
    blob = repo.git("rev-parse", ":src/app.py").strip()  # from the index: nothing read
    assert learnt["src/app.py"][1] == git_blob(blob)
    assert learnt["src/util.py"][1] == safe_hash(str(repo.path / "src" / "util.py"))
    assert learnt["scratch.txt"][1] == safe_hash(str(repo.path / "scratch.txt"))
    # the graph is what the next windows are decided against
    (repo.path / "README.md").unlink()
    (repo.path / "docs" / "new.md").write_text("new\n")
    files.observe(Change.DELETED, "README.md", origin=WATCHER)
    files.observe(Change.MODIFIED, "docs/new.md", origin=WATCHER)
    await files.close()
    changes = sorted((s.data["file_path"], s.data["change_type"]) for s in submitted[1:])
    assert changes == [("README.md", "deleted"), ("docs/new.md", "created")]


async def test_a_second_catch_up_reports_what_was_created_meanwhile_only(
    tmp_path: Path, writer: StoreWriter
) -> None:
    repo = Repo.existing(tmp_path / "ws")
    files, submitted, _ = await activity(tmp_path, writer, Settings(debounce_ms=10))
    await files.catch_up(time.time_ns(), time.time_ns())
    await files.close()
    submitted.clear()
    (repo.path / "made-while-stopped.txt").write_text("new\n")
    files, submitted, _ = await activity(tmp_path, writer, Settings(debounce_ms=10))
    await files.catch_up(time.time_ns(), time.time_ns())
    await files.close()
    assert [(s.data["file_path"], s.data["change_type"]) for s in submitted] == [
        ("made-while-stopped.txt", "created")
    ]


async def test_a_rescan_stores_a_slice_at_a_time_what_changed_only(
    tmp_path: Path, writer: StoreWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_rescan, "SLICE", 7)
    repo = Repo.existing(tmp_path / "ws")
    for index in range(40):
        repo.write(f"many/f{index}.txt", f"{index}\n")
    files, submitted, _ = await activity(tmp_path, writer, Settings(debounce_ms=10))
    await files.catch_up(time.time_ns(), time.time_ns())
    submitted.clear()
    slices: list[int] = []
    decide = files.settle_now

    async def counted(paths: list[str]) -> None:
        slices.append(len(paths))
        await decide(paths)

    files.rescans._decide = counted
    for index in range(0, 40, 2):
        (repo.path / "many" / f"f{index}.txt").unlink()
    (repo.path / "many" / "added.txt").write_text("added\n")
    files.recheck_tree("")
    await files.rescans.idle()
    await files.close()
    changes = sorted((s.data["file_path"], s.data["change_type"]) for s in submitted)
    assert changes == sorted(
        [("many/added.txt", "created")]
        + [(f"many/f{index}.txt", "deleted") for index in range(0, 40, 2)]
    )
    assert max(slices) <= 7


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


async def test_a_batch_is_decided_and_submitted_while_the_intake_is_busy(
    tmp_path: Path, writer: StoreWriter
) -> None:
    """The graph's work waits for the intake's quiet: a batch read against the store and
    screened must count as busy from its first read to its submission, or the graph takes
    the store's writer in between (a 20,000-path burst waited behind it)."""
    steps: list[str] = []
    submitted: list[Submission] = []

    @contextlib.contextmanager
    def busy() -> Iterator[None]:
        steps.append("busy")
        yield
        steps.append(f"quiet after {len(submitted)} submitted")

    files, submitted, _ = await activity(tmp_path, writer, Settings(debounce_ms=10), busy)
    files.recorded.screen = _noting(files.recorded.screen, steps)  # type: ignore[method-assign]
    (files.root / "a.py").write_text("x\n")
    files.observe(Change.CREATED, "a.py")
    await files.close()
    assert [s.data["file_path"] for s in submitted] == ["a.py"]
    assert steps == ["busy", "screened", "quiet after 1 submitted"]


def _noting(screen: Any, steps: list[str]) -> Any:
    async def noted(*args: Any) -> Any:
        result = await screen(*args)
        steps.append("screened")
        return result

    return noted


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


async def test_a_settled_path_is_asked_of_the_disk_once(
    tmp_path: Path, writer: StoreWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deciding a window (created, modified, deleted, nothing) and screening its content
    against what is recorded share one look at the disk and one visit to the store per
    slice: a burst of new files is not stat'ed twice, and a burst larger than a slice is
    stored in its order."""
    files, submitted, _ = await activity(tmp_path, writer, Settings(debounce_ms=10))
    names = [f"n{i:04}.txt" for i in range(600)]
    for name in names:
        (files.root / name).write_text(name)
    calls: Counter[str] = Counter()
    inside = str(files.root) + "/"

    def stat_of(function: Any, kind: str) -> Any:
        def looked(path: Any, *args: Any, **kwargs: Any) -> Any:
            if str(path).startswith(inside):
                calls[f"{kind} {str(path)[len(inside) :]}"] += 1
            return function(path, *args, **kwargs)

        return looked

    monkeypatch.setattr(os, "lstat", stat_of(os.lstat, "stat"))
    monkeypatch.setattr(os, "stat", stat_of(os.stat, "stat"))
    monkeypatch.setattr(writer, "read", counted(writer.read, "store visits", calls))
    files.observe_many([(Change.CREATED, name) for name in names], origin=WATCHER)
    await files.close()
    assert [s.data["file_path"] for s in submitted] == names
    assert {calls[f"stat {name}"] for name in names} == {1}
    assert calls["store visits"] == -(-len(names) // file_activity._EMIT_SLICE)  # one a slice


async def test_a_burst_decides_its_next_slices_while_earlier_ones_are_stored(
    tmp_path: Path, writer: StoreWriter
) -> None:
    """While a slice waits for its commit, the next ones are decided and handed over (up to
    _STORING in flight), in order; the batch is done only once every slice is stored."""
    files, _, _ = await activity(tmp_path, writer, Settings(debounce_ms=10))
    in_flight = file_activity._STORING
    slices = in_flight + 2
    names = [f"n{i:04}.txt" for i in range(slices * file_activity._EMIT_SLICE)]
    for name in names:
        (files.root / name).write_text(name)
    handed: list[list[Submission]] = []
    stored: list[asyncio.Future[None]] = []
    decided = [0]

    def submit(batch: list[Submission]) -> asyncio.Future[None]:
        handed.append(batch)
        stored.append(asyncio.get_running_loop().create_future())
        return stored[-1]

    async def deciding(batch: Any, decide: Any = files._decide) -> Any:
        submissions = await decide(batch)
        decided[0] += 1
        return submissions

    def handed_count(count: int) -> Callable[[], bool]:
        return lambda: len(handed) == count

    files._submit = submit
    files._decide = deciding  # type: ignore[method-assign]
    files.observe_many([(Change.CREATED, name) for name in names], origin=WATCHER)
    # The slice after those in flight is decided, then waits for the first to be stored.
    await wait_until_async(lambda: decided[0] == in_flight + 1, timeout=60, what="decided")
    assert len(handed) == in_flight > 1  # handed over while the first is not stored yet
    stored[0].set_result(None)
    await wait_until_async(handed_count(in_flight + 1), timeout=60, what="handed")
    closing = asyncio.ensure_future(files.close())
    for index in range(1, slices):
        assert not closing.done()  # a slice is not stored yet
        stored[index].set_result(None)
        expected = handed_count(min(slices, in_flight + 1 + index))
        await wait_until_async(expected, timeout=60, what="handed")
    await closing
    assert [s.data["file_path"] for batch in handed for s in batch] == names


def test_a_folder_whose_name_is_not_utf8_sends_its_events_without_its_root() -> None:
    # Its name has no UTF-8 form: with the root in them, every file event would be refused
    # (text_not_unicode); without it they are stored as any other folder's.
    sending = Settings(send_workspace_root=True)
    odd = Path(os.fsdecode(b"/projects/caf\xe9"))
    assert file_activity.root_sent(odd, sending) is None
    assert file_activity.root_sent(Path("/projects/café"), sending) == "/projects/café"
    assert file_activity.root_sent(Path("/projects/café"), Settings()) is None

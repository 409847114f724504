"""The inotify watcher against the real kernel: what it reports for new directories, moves,
temp names, odd names, and what it does when reports were lost (an overflow)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.sources.debounce import Change
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux only")


class Recorder:
    def __init__(self) -> None:
        self.changes: list[tuple[Change, str, str | None]] = []
        self.lost_dirs: list[str] = []
        self.full = False

    def changed(self, change: Change, path: str, previous: str | None = None) -> None:
        self.changes.append((change, path, previous))

    def lost(self, directory: str) -> None:
        self.lost_dirs.append(directory)

    def saturated(self) -> bool:
        return self.full


Watched = tuple[Any, Recorder, Path]


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Watched]:
    from mplp_lsp.sources.fswatch import _Inotify, _skipper

    sink = Recorder()
    watcher = _Inotify(str(tmp_path), sink, _skipper(str(tmp_path), ()))
    watcher._add_tree(str(tmp_path), report=False)  # what start() does before reading
    yield watcher, sink, tmp_path
    watcher._inotify.close()


def paths(sink: Recorder, change: Change | None = None) -> set[str]:
    return {path for c, path, _ in sink.changes if change is None or c is change}


def test_files_written_before_a_new_directory_was_watched_are_reported(watched: Watched) -> None:
    watcher, sink, root = watched
    # everything is written before the watcher reads a single event: the directories'
    # watches cannot exist yet when their files appear
    for d in range(3):
        (root / f"d{d}" / "sub").mkdir(parents=True)
        for f in range(5):
            (root / f"d{d}" / "sub" / f"f{f}.txt").write_text("x")
    watcher._read()
    expected = {f"{root}/d{d}/sub/f{f}.txt" for d in range(3) for f in range(5)}
    assert paths(sink) == expected
    # the new directories are watched now: a later file is reported by its own event
    sink.changes.clear()
    (root / "d1" / "sub" / "late.txt").write_text("y")
    watcher._read()
    assert paths(sink) == {f"{root}/d1/sub/late.txt"}


def test_directories_and_fifos_are_not_reported_as_files(watched: Watched) -> None:
    watcher, sink, root = watched
    (root / "d").mkdir()
    os.mkfifo(root / "d" / "pipe")
    os.mkfifo(root / "fifo")
    watcher._read()
    # the FIFO's own event is a hint (the disk decides later); a listing never reports it
    assert f"{root}/d" not in paths(sink)
    assert f"{root}/d/pipe" not in paths(sink)


def test_a_move_is_one_rename_and_a_temp_file_renamed_into_place_is_the_files_change(
    watched: Watched,
) -> None:
    watcher, sink, root = watched
    (root / "a.txt").write_text("a")
    watcher._read()
    sink.changes.clear()
    (root / "a.txt").rename(root / "b.txt")
    temp = root / "m.cpython-311.pyc.140683554367488"
    temp.write_bytes(b"\0")
    watcher._read()
    temp.rename(root / "m.cpython-311.pyc")
    watcher._read()
    assert (Change.RENAMED, f"{root}/b.txt", f"{root}/a.txt") in sink.changes
    assert (Change.MODIFIED, f"{root}/m.cpython-311.pyc", None) in sink.changes
    assert not any("pyc.1406" in path for _, path, _ in sink.changes)


def test_a_name_that_is_not_utf8_reaches_the_sink_as_surrogates(watched: Watched) -> None:
    watcher, sink, root = watched
    with open(os.path.join(os.fsencode(root), b"bad\xff.txt"), "wb") as out:
        out.write(b"x")
    watcher._read()
    assert paths(sink) == {f"{root}/bad\udcff.txt"}


def test_an_overflow_watches_again_and_hands_the_workspace_over(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an overflow every directory is watched again (one made meanwhile too), and the
    sink compares the whole workspace with the graph: nothing is reported file by file."""
    from inotify_simple import Event, flags

    watcher, sink, root = watched
    (root / "kept").mkdir()
    (root / "kept" / "k.txt").write_text("k")
    watcher._read()
    sink.changes.clear()
    (root / "kept" / "lost.txt").write_text("an event the overflow dropped")
    monkeypatch.setattr(
        watcher._inotify, "read", lambda timeout: [Event(-1, flags.Q_OVERFLOW, 0, "")]
    )
    (root / "made-meanwhile").mkdir()
    watcher._read()
    monkeypatch.undo()
    assert sink.lost_dirs == [str(root)]
    assert sink.changes == []
    assert str(root / "made-meanwhile") in watcher._wds
    sink.changes.clear()
    (root / "made-meanwhile" / "later.txt").write_text("reported by its new watch")
    watcher._read()
    assert f"{root}/made-meanwhile/later.txt" in paths(sink)


def test_a_directory_moved_inside_the_tree_is_a_rename_per_file(watched: Watched) -> None:
    watcher, sink, root = watched
    (root / "pkg" / "sub").mkdir(parents=True)
    for name in ("pkg/a.py", "pkg/sub/b.py"):
        (root / name).write_text(name)
    watcher._read()
    sink.changes.clear()
    (root / "pkg").rename(root / "lib")
    watcher._read()
    assert sorted(sink.changes) == [
        (Change.RENAMED, f"{root}/lib/a.py", f"{root}/pkg/a.py"),
        (Change.RENAMED, f"{root}/lib/sub/b.py", f"{root}/pkg/sub/b.py"),
    ]
    assert sink.lost_dirs == []
    sink.changes.clear()
    (root / "lib" / "sub" / "c.py").write_text("watched where it is now")
    watcher._read()
    assert paths(sink) == {f"{root}/lib/sub/c.py"}


async def test_a_saturated_sink_pauses_reading_and_the_kernel_keeps_the_reports(
    tmp_path: Path,
) -> None:
    import asyncio

    from mplp_lsp.sources.fswatch import _Inotify, _skipper

    sink = Recorder()
    watcher = _Inotify(str(tmp_path), sink, _skipper(str(tmp_path), ()))
    watcher.start(asyncio.get_running_loop())
    try:
        sink.full = True
        (tmp_path / "while-full.txt").write_text("held by the kernel\n")
        await asyncio.sleep(0.3)
        assert sink.changes == []  # nothing read while the sink is full
        sink.full = False
        for _ in range(100):
            if sink.changes:
                break
            await asyncio.sleep(0.05)
        assert paths(sink) == {f"{tmp_path}/while-full.txt"}
    finally:
        watcher.close()


def test_what_the_kernel_queued_is_reported_when_the_watcher_closes(tmp_path: Path) -> None:
    import asyncio

    from mplp_lsp.sources.fswatch import _Inotify, _skipper

    sink = Recorder()
    watcher = _Inotify(str(tmp_path), sink, _skipper(str(tmp_path), ()))
    loop = asyncio.new_event_loop()
    try:
        watcher.start(loop)
        (tmp_path / "written.txt").write_text("just before the stop")
        watcher.close()  # the loop never ran: only the close can have read it
    finally:
        loop.close()
    assert paths(sink) == {f"{tmp_path}/written.txt"}


def test_a_deleted_directory_is_handed_over_for_a_recheck(watched: Watched) -> None:
    watcher, sink, root = watched
    (root / "gone").mkdir()
    (root / "gone" / "g.txt").write_text("g")
    watcher._read()
    (root / "gone" / "g.txt").unlink()
    (root / "gone").rmdir()
    watcher._read()
    assert str(root / "gone") in sink.lost_dirs


async def test_the_watchfiles_fallback_survives_a_name_that_stops_watchfiles(
    tmp_path: Path,
) -> None:
    """The fallback of other platforms, run here: watchfiles stops on a non-UTF-8 name; the
    fallback rescans, restarts, and the next file is reported."""
    import asyncio

    from mplp_lsp.sources.fswatch import _skipper, _watch_portable

    sink, stop, ready = Recorder(), asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        _watch_portable(str(tmp_path), sink, stop, _skipper(str(tmp_path), ()), ready.set)
    )

    async def until(condition: Any) -> None:
        await wait_until_async(condition, timeout=10, what=lambda: sink.changes)

    try:
        await ready.wait()
        await asyncio.sleep(0.5)  # watchfiles adds its watches in its first step
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "f.txt").write_text("f")
        await until(lambda: f"{tmp_path}/d/f.txt" in paths(sink))
        Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"bad\xff.txt"))).write_bytes(b"x")
        await until(lambda: sink.lost_dirs == [str(tmp_path)])
        await asyncio.sleep(0.5)
        (tmp_path / "next.txt").write_text("n")
        await until(lambda: f"{tmp_path}/next.txt" in paths(sink))
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def test_an_ignored_directory_is_not_watched_until_a_gitignore_change_frees_it(
    tmp_path: Path,
) -> None:
    from mplp_lsp.sources.fswatch import _Inotify, _skipper

    ignored = {"node_modules"}
    sink = Recorder()
    watcher = _Inotify(str(tmp_path), sink, _skipper(str(tmp_path), (), ignored.__contains__))
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    watcher._add_tree(str(tmp_path), report=False)
    try:
        assert str(tmp_path / "node_modules") not in watcher._wds
        (tmp_path / "node_modules" / "pkg" / "index.js").write_text("x")
        (tmp_path / "node_modules" / "new").mkdir()
        watcher._read()
        assert sink.changes == []
        ignored.clear()  # what the workspace's rules say once the .gitignore below is read
        (tmp_path / ".gitignore").write_text("")
        watcher._read()
        assert str(tmp_path / "node_modules" / "pkg") in watcher._wds
        sink.changes.clear()
        (tmp_path / "node_modules" / "pkg" / "later.js").write_text("y")
        watcher._read()
        assert paths(sink) == {f"{tmp_path}/node_modules/pkg/later.js"}
    finally:
        watcher._inotify.close()

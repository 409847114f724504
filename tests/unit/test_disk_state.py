"""The disk decides a watched window's change: whatever order the reports came in, applying
the settled events to the graph leaves exactly the regular files on disk."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.runtime.psg.files import FileChange
from mplp_lsp.sources.debounce import Change, Settled
from mplp_lsp.sources.disk_state import WATCHED, DiskState, Facts
from mplp_lsp.sources.temp_names import is_temp_name

NAMES = ["a", "b", "c"]
OPS = st.tuples(st.sampled_from(["write", "delete", "mkdir", "fifo", "rename"]),
                st.sampled_from(NAMES), st.sampled_from(NAMES))  # fmt: skip


def settled(path: str, change: Change, previous: str | None = None) -> Settled:
    return Settled(path, change, previous, 0.0, 0.0, 1, {WATCHED: True})


def apply(root: Path, op: str, name: str, other: str) -> None:
    path = root / name
    try:
        if op == "write":  # non-blocking: a FIFO without a reader refuses (ENXIO)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK)
            os.write(fd, f"{op}{other}\n".encode())
            os.close(fd)
        elif op == "delete":
            path.unlink()
        elif op == "mkdir":
            path.mkdir()
        elif op == "fifo":
            os.mkfifo(path)
        else:
            path.rename(root / other)
    except OSError:
        pass  # the op does not fit what is there (a directory, nothing...): nothing happened


def regular_files(root: Path) -> dict[str, Facts]:
    out: dict[str, Facts] = {}
    for entry in os.scandir(root):
        if entry.is_file(follow_symlinks=False):
            info = entry.stat(follow_symlinks=False)
            out[entry.name] = (info.st_size, info.st_mtime_ns, info.st_ino)
    return out


@settings(max_examples=150, deadline=None)
@given(
    before=st.lists(OPS, max_size=4),
    after=st.lists(OPS, min_size=1, max_size=6),
    reported=st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from(list(Change)), st.sampled_from(NAMES)),
        max_size=6,
    ),
)
def test_events_decided_by_the_disk_bring_the_graph_to_the_disk(
    before: list[tuple[str, str, str]],
    after: list[tuple[str, str, str]],
    reported: list[tuple[str, Change, str]],
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for op in before:
            apply(root, *op)
        graph = regular_files(root)  # the graph is in step with the disk before the window
        for op in after:
            apply(root, *op)
        state = DiskState(str(root))
        # every touched path settles once, with whatever change the reports made of it, in
        # any order; reports of untouched paths (late duplicates) come along too
        touched = {name for _, name, _ in after} | {
            other for op, _, other in after if op == "rename"
        }
        windows = [settled(name, Change.MODIFIED) for name in sorted(touched)]
        windows += [
            settled(name, change, other if change is Change.RENAMED and other != name else None)
            if change is not Change.RENAMED or other != name
            else settled(name, Change.MODIFIED)
            for name, change, other in reported
        ]
        on_disk = regular_files(root)
        for event in state.settle(windows, dict(graph)):
            # no event contradicts the disk: what it says is gone is gone, and what it says
            # is there is a regular file
            gone = event.path if event.change is Change.DELETED else event.previous_path
            assert gone is None or gone not in on_disk
            assert event.change is Change.DELETED or event.path in on_disk
            if event.previous_path is not None:
                graph.pop(event.previous_path, None)
            if event.change is Change.DELETED:
                assert event.path in graph  # only what the graph has is deleted
                del graph[event.path]
            else:
                if event.change is Change.CREATED:
                    assert event.path not in graph
                graph[event.path] = regular_files(root)[event.path]
        assert graph == regular_files(root)


def test_a_file_created_and_deleted_in_one_batch_gives_nothing(tmp_path: Path) -> None:
    state = DiskState(str(tmp_path))
    # the watcher handed "deleted" before "created": the coalescer folds that into "modified"
    assert state.settle([settled("t.txt", Change.MODIFIED)], {}) == []
    assert state.unchanged == 1


def test_a_directory_is_never_a_file_event(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "p")
    state = DiskState(str(tmp_path))
    assert state.settle([settled("d", Change.CREATED), settled("p", Change.CREATED)], {}) == []


def test_what_was_sent_counts_until_the_graph_has_applied_it(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    state = DiskState(str(tmp_path))
    [first] = state.settle([settled("a.txt", Change.CREATED)], {})
    assert first.change is Change.CREATED
    # the graph lags: a listing that reports the same file again adds nothing
    assert state.settle([settled("a.txt", Change.CREATED)], {}) == []
    (tmp_path / "a.txt").write_text("two, longer\n")
    [second] = state.settle([settled("a.txt", Change.CREATED)], {})
    assert second.change is Change.MODIFIED
    state.applied([FileChange("a.txt", "created", "t", None, "e1")])
    state.applied([FileChange("a.txt", "modified", "t", None, "e2")])
    assert state.pending_under("") == []


def test_editor_windows_are_taken_at_their_word(tmp_path: Path) -> None:
    editor = Settled("gone.txt", Change.MODIFIED, None, 0.0, 0.0, 1, {})
    assert DiskState(str(tmp_path)).settle([editor], {}) == [editor]


def test_temp_names_of_other_programs() -> None:
    temps = ["x.cpython-311.pyc.140683554367488", ".a.py.swp", ".a.py.swx", "4913", "a.py~",
             ".#a.py", "#a.py#", "a.py___jb_tmp___", "a.py___jb_old___", ".goutputstream-AB12"]  # fmt: skip
    real = ["a.py", "x.pyc", "x.cpython-311.pyc", "swp", ".swp", "~", "a.swp", "4913.txt", "#a"]
    assert [name for name in temps if not is_temp_name(name)] == []
    assert [name for name in real if is_temp_name(name)] == []

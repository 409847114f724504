"""The disk and the graph decide each window's change: whatever order the reports came in,
applying the settled events to the graph leaves exactly the regular files on disk; a created
file is one the graph did not have, and a rename is kept only with evidence of identity."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.graph.content_hash import safe_hash
from mplp_lsp.graph.files import FileChange
from mplp_lsp.sources.debounce import PAIRED, Change, Settled
from mplp_lsp.sources.disk_state import WROTE, DiskState, Facts
from mplp_lsp.sources.temp_names import is_temp_name
from tests.support.properties import examples

NAMES = ["a", "b", "c"]
OPS = st.tuples(st.sampled_from(["write", "delete", "mkdir", "fifo", "rename"]),
                st.sampled_from(NAMES), st.sampled_from(NAMES))  # fmt: skip


def settled(path: str, change: Change, previous: str | None = None, /, **extra: object) -> Settled:
    return Settled(path, change, previous, 0.0, 0.0, 1, extra)


def facts(path: Path) -> Facts:
    info = path.stat()
    return (info.st_size, info.st_mtime_ns, info.st_ino)


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


@settings(max_examples=examples(150), deadline=None)
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


def test_a_file_the_graph_does_not_have_is_created_however_it_was_reported(
    tmp_path: Path,
) -> None:
    (tmp_path / "m.pyc").write_bytes(b"bytecode")  # written through a temp name: "modified"
    [event] = DiskState(str(tmp_path)).settle([settled("m.pyc", Change.MODIFIED)], {})
    assert event.change is Change.CREATED


def test_a_file_rewritten_through_a_rename_is_modified(tmp_path: Path) -> None:
    target = tmp_path / "a.py"
    target.write_text("before\n")
    recorded = {"a.py": facts(target)}
    scratch = tmp_path / "a.py.tmp"
    scratch.write_text("after\n")
    scratch.rename(target)  # a new inode at the old path: sed -i, rsync, an atomic save
    [event] = DiskState(str(tmp_path)).settle([settled("a.py", Change.CREATED)], recorded)
    assert event.change is Change.MODIFIED


def test_an_editor_save_is_a_write_even_when_the_graph_has_its_facts(tmp_path: Path) -> None:
    """The graph reads the disk when it applies an event: after two quick saves it may hold
    the second one's facts under the first event. The editor's didSave still counts."""
    (tmp_path / "a.py").write_text("saved twice\n")
    recorded = {"a.py": facts(tmp_path / "a.py")}
    state = DiskState(str(tmp_path))
    assert state.settle([settled("a.py", Change.MODIFIED)], recorded) == []
    [event] = state.settle([settled("a.py", Change.MODIFIED, **{WROTE: True})], recorded)
    assert event.change is Change.MODIFIED


def test_a_save_the_editor_announced_and_never_made_gives_nothing(tmp_path: Path) -> None:
    (tmp_path / "kept.py").write_text("unchanged\n")
    recorded = {"kept.py": facts(tmp_path / "kept.py")}
    announced = [settled("never.py", Change.MODIFIED), settled("kept.py", Change.MODIFIED)]
    assert DiskState(str(tmp_path)).settle(announced, recorded) == []


def test_a_file_replaced_by_a_link_is_deleted(tmp_path: Path) -> None:
    (tmp_path / "b.py").write_text("b\n")
    (tmp_path / "a.py").write_text("a\n")
    recorded = {"a.py": facts(tmp_path / "a.py"), "b.py": facts(tmp_path / "b.py")}
    (tmp_path / "a.py").unlink()
    (tmp_path / "a.py").symlink_to("b.py")
    [event] = DiskState(str(tmp_path)).settle([settled("a.py", Change.MODIFIED)], recorded)
    assert (event.path, event.change) == ("a.py", Change.DELETED)


def test_a_rename_is_kept_only_with_evidence_of_identity(tmp_path: Path) -> None:
    for name in ("moved.py", "notes.md", "guessed.py", "same.py"):
        (tmp_path / name).write_text(f"{name}\n")
    recorded = {name: facts(tmp_path / name) for name in ("moved.py", "notes.md", "guessed.py")}
    recorded["same.py"] = (None, None, None)  # no stat facts: the content decides
    hashes = {"same.py": safe_hash(str(tmp_path / "same.py"))}
    (tmp_path / "moved.py").rename(tmp_path / "new.py")  # a move: one inode
    (tmp_path / "guessed.py").rename(tmp_path / "paired.py")  # the same, paired by guess
    (tmp_path / "same.py").rename(tmp_path / "copy.py")
    (tmp_path / "notes.md").unlink()  # a delete and an unrelated create...
    (tmp_path / "main.py").write_text("x\n")
    recorded["notes.md"] = (*recorded["notes.md"][:2], os.lstat(tmp_path / "main.py").st_ino)
    windows = [
        settled("new.py", Change.RENAMED, "moved.py"),
        settled("paired.py", Change.RENAMED, "guessed.py", **{PAIRED: True}),
        settled("copy.py", Change.RENAMED, "same.py", **{PAIRED: True}),
        # ...paired by guess, and the kernel gave the new file the freed inode number
        settled("main.py", Change.RENAMED, "notes.md", **{PAIRED: True}),
    ]
    events = DiskState(str(tmp_path)).settle(windows, recorded, hashes)
    assert sorted((e.path, e.change, e.previous_path) for e in events) == [
        ("copy.py", Change.RENAMED, "same.py"),
        ("main.py", Change.CREATED, None),
        ("new.py", Change.RENAMED, "moved.py"),
        ("notes.md", Change.DELETED, None),
        ("paired.py", Change.RENAMED, "guessed.py"),
    ]


def test_what_the_graph_applies_while_facts_are_read_is_forgotten_after(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    state = DiskState(str(tmp_path))
    state.settle([settled("a.txt", Change.CREATED)], {})
    with state.reading():  # the graph's facts were read before it applied the creation
        state.applied([FileChange("a.txt", "created", "t", None, "e1")])
        assert state.settle([settled("a.txt", Change.CREATED)], {}) == []
    assert state.pending_under("") == []


def test_temp_names_of_other_programs() -> None:
    temps = ["x.cpython-311.pyc.140683554367488", ".a.py.swp", ".a.py.swx", "4913", "a.py~",
             ".#a.py", "#a.py#", "a.py___jb_tmp___", "a.py___jb_old___", ".goutputstream-AB12"]  # fmt: skip
    real = ["a.py", "x.pyc", "x.cpython-311.pyc", "swp", ".swp", "~", "a.swp", "4913.txt", "#a"]
    assert [name for name in temps if not is_temp_name(name)] == []
    assert [name for name in real if is_temp_name(name)] == []

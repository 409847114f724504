"""Which saves are echoes of content already recorded (sources/recorded.py), and the scratch
names of the daemon's own writes (workspace.admit)."""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.engine.file_activity import admit
from mplp_lsp.graph.files import bytes_hash
from mplp_lsp.sources.debounce import Change
from mplp_lsp.sources.recorded import Fingerprint, RecordedContent, scratch_name
from tests.support.properties import examples


def _screen(recorded: RecordedContent, paths: Sequence[str]) -> set[str]:
    return asyncio.run(recorded.screen(paths))


_tick = itertools.count(1)


def _write(path: Path, content: bytes) -> None:
    """One write, with a modification time of its own (file system clocks are coarse)."""
    path.write_bytes(content)
    stamp = 1_700_000_000_000_000_000 + next(_tick) * 1_000_000
    os.utime(path, ns=(stamp, stamp))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from([b"", b"a", b"b", b"ab"]), min_size=1, max_size=12))
def test_each_write_is_one_event_however_often_it_is_reported(contents: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        recorded = RecordedContent(root)
        sent: list[bytes] = []
        for content in contents:
            _write(root / "f.txt", content)
            for _report in range(2):  # every save reported twice (didSave, then the watcher)
                if not _screen(recorded, ["f.txt"]):
                    sent.append(content)
        # No echo, and every write (a revert to older content included) once.
        assert sent == contents


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.sampled_from([b"", b"a", b"b", b"ab"]), min_size=1, max_size=8))
def test_two_reports_screened_at_once_are_one_event(contents: list[bytes]) -> None:
    """Two sources report the same write at the same moment (a second editor's save handed
    over while the watcher's report of it is being screened): one of them is the event."""

    async def reported(root: Path) -> list[bytes]:
        recorded = RecordedContent(root)
        sent: list[bytes] = []
        for content in contents:
            _write(root / "f.txt", content)
            for echoes in await asyncio.gather(*(recorded.screen(["f.txt"]) for _ in range(2))):
                if not echoes:
                    sent.append(content)
        return sent

    with tempfile.TemporaryDirectory() as scratch:
        assert asyncio.run(reported(Path(scratch))) == contents


def _fingerprint(path: Path, content: bytes) -> Fingerprint:
    info = path.stat()
    return Fingerprint(info.st_size, info.st_mtime_ns, info.st_ino, bytes_hash(content))


def test_the_graph_is_the_reference_until_this_process_sends_something(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    _write(target, b"graph")
    graph = {"f.txt": _fingerprint(target, b"graph")}

    async def lookup(paths: Sequence[str]) -> dict[str, Fingerprint]:
        return {p: graph[p] for p in paths if p in graph}

    recorded = RecordedContent(tmp_path, graph=lookup)
    assert _screen(recorded, ["f.txt"]) == {"f.txt"}  # the write the graph holds
    _write(target, b"graph")  # touched, same content (a restart in between): hashed, equal
    assert _screen(RecordedContent(tmp_path, graph=lookup), ["f.txt"]) == {"f.txt"}
    _write(target, b"new")
    assert _screen(recorded, ["f.txt"]) == set()
    # The graph may already hold a later save's content under an earlier event: the last
    # write sent decides, so this save is not lost.
    _write(target, b"later")
    graph["f.txt"] = _fingerprint(target, b"later")
    assert _screen(recorded, ["f.txt"]) == set()


def test_own_write_echo_is_not_an_edit_until_other_content_is_seen(tmp_path: Path) -> None:
    recorded = RecordedContent(tmp_path)
    target = tmp_path / "f.txt"
    _write(target, b"user")
    assert _screen(recorded, ["f.txt"]) == set()
    recorded.wrote("f.txt", b"<<<<<<< conflict")
    _write(target, b"<<<<<<< conflict")
    assert _screen(recorded, ["f.txt"]) == {"f.txt"}
    _write(target, b"resolved")
    assert _screen(recorded, ["f.txt"]) == set()
    _write(target, b"<<<<<<< conflict")  # by the user now: an edit like any other
    assert _screen(recorded, ["f.txt"]) == set()


def test_a_file_deleted_and_recreated_with_the_same_content_is_new(tmp_path: Path) -> None:
    recorded = RecordedContent(tmp_path)
    _write(tmp_path / "f.txt", b"same")
    assert _screen(recorded, ["f.txt"]) == set()
    recorded.forget(["f.txt"])
    assert _screen(recorded, ["f.txt"]) == set()


def test_scratch_names_never_become_events() -> None:
    assert scratch_name("src/.mplp-restore-ab12cd")
    assert not scratch_name("src/mplp-restore.py")
    assert admit(Change.CREATED, "src/.mplp-restore-ab12cd", None) is None
    assert admit(Change.RENAMED, "src/a.py", "src/.mplp-restore-ab12cd") == (Change.MODIFIED, None)
    assert admit(Change.RENAMED, "src/b.py", "src/a.py") == (Change.RENAMED, "src/a.py")

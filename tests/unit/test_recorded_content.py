"""Which saves are echoes of content already recorded (sources/recorded.py), and the scratch
names of the daemon's own writes (workspace.admit)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.runtime.psg_files import bytes_hash
from mplp_lsp.sources.debounce import Change
from mplp_lsp.sources.recorded import Fingerprint, RecordedContent, scratch_name
from mplp_lsp.workspace import admit


def _screen(recorded: RecordedContent, paths: Sequence[str]) -> set[str]:
    return asyncio.run(recorded.screen(paths))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"", b"a", b"b", b"ab"]), min_size=1, max_size=12))
def test_a_save_is_an_event_exactly_when_its_content_differs_from_the_last_one_sent(
    contents: list[bytes],
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        recorded = RecordedContent(root)
        sent: list[bytes] = []
        for content in contents:
            (root / "f.txt").write_bytes(content)
            for _report in range(2):  # every save reported twice (didSave, then the watcher)
                if not _screen(recorded, ["f.txt"]):
                    sent.append(content)
        # No echo, and every change (a revert to older content included) once.
        expected = [c for i, c in enumerate(contents) if i == 0 or contents[i - 1] != c]
        assert sent == expected


def test_the_graph_is_the_reference_until_this_process_sends_something(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"graph")
    graph: dict[str, Fingerprint] = {"f.txt": (5, bytes_hash(b"graph"))}

    async def lookup(paths: Sequence[str]) -> dict[str, Fingerprint]:
        return {p: graph[p] for p in paths if p in graph}

    recorded = RecordedContent(tmp_path, graph=lookup)
    assert _screen(recorded, ["f.txt"]) == {"f.txt"}  # what the graph holds: not an event
    (tmp_path / "f.txt").write_bytes(b"new")
    assert _screen(recorded, ["f.txt"]) == set()
    # The graph may already hold a later save's content under an earlier event: the last
    # content sent decides, so this save is not lost.
    graph["f.txt"] = (5, bytes_hash(b"later"))
    (tmp_path / "f.txt").write_bytes(b"later")
    assert _screen(recorded, ["f.txt"]) == set()


def test_own_write_echo_is_not_an_edit_until_other_content_is_seen(tmp_path: Path) -> None:
    recorded = RecordedContent(tmp_path)
    target = tmp_path / "f.txt"
    target.write_bytes(b"user")
    assert _screen(recorded, ["f.txt"]) == set()
    recorded.wrote("f.txt", b"<<<<<<< conflict")
    target.write_bytes(b"<<<<<<< conflict")
    assert _screen(recorded, ["f.txt"]) == {"f.txt"}
    target.write_bytes(b"resolved")
    assert _screen(recorded, ["f.txt"]) == set()
    target.write_bytes(b"<<<<<<< conflict")  # by the user now: an edit like any other
    assert _screen(recorded, ["f.txt"]) == set()


def test_a_file_deleted_and_recreated_with_the_same_content_is_new(tmp_path: Path) -> None:
    recorded = RecordedContent(tmp_path)
    (tmp_path / "f.txt").write_bytes(b"same")
    assert _screen(recorded, ["f.txt"]) == set()
    recorded.forget(["f.txt"])
    assert _screen(recorded, ["f.txt"]) == set()


def test_scratch_names_never_become_events() -> None:
    assert scratch_name("src/.mplp-restore-ab12cd")
    assert not scratch_name("src/mplp-restore.py")
    assert admit(Change.CREATED, "src/.mplp-restore-ab12cd", None) is None
    assert admit(Change.RENAMED, "src/a.py", "src/.mplp-restore-ab12cd") == (Change.MODIFIED, None)
    assert admit(Change.RENAMED, "src/b.py", "src/a.py") == (Change.RENAMED, "src/a.py")

"""Parsers and queues of the comparisons after lost reports and of the baseline: the Git
index listing, and the queue of directories to compare with the graph (property tests)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.engine.file_rescan import enqueue
from mplp_lsp.vcs.index import _blobs

NAMES = st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]), min_size=1)
ENTRIES = st.lists(
    st.tuples(
        st.sampled_from(["100644", "100755", "120000", "160000"]),
        st.text("0123456789abcdef", min_size=40, max_size=40),
        st.sampled_from(["0", "1", "2", "3"]),
        NAMES,
    ),
    max_size=20,
)


@given(ENTRIES)
def test_the_index_listing_gives_each_staged_regular_file_its_blob(
    entries: list[tuple[str, str, str, str]],
) -> None:
    listing = "".join(f"{mode} {oid} {stage}\t{path}\0" for mode, oid, stage, path in entries)
    expected = {
        path: oid
        for mode, oid, stage, path in entries
        if mode in ("100644", "100755") and stage == "0"
    }
    assert _blobs(listing) == expected


DIRECTORIES = st.lists(
    st.lists(st.sampled_from(["a", "b", "ab"]), max_size=3).map("/".join), max_size=12
)


def covered(directory: str, by: str) -> bool:
    return not by or directory == by or directory.startswith(f"{by}/")


@given(DIRECTORIES)
def test_the_queue_covers_every_request_once(requests: list[str]) -> None:
    queue: list[str] = []
    for directory in requests:
        queue = enqueue(queue, directory)
    for directory in requests:  # each request is compared, by itself or by a parent queued
        assert any(covered(directory, by) for by in queue)
    for index, directory in enumerate(queue):  # and no directory is compared twice
        others = queue[:index] + queue[index + 1 :]
        assert not any(covered(directory, by) for by in others)

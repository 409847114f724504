"""The editor file source's pure helpers."""

from __future__ import annotations

from pathlib import PurePosixPath

from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.sources.files import language_of, suffix_of

_NAMES = (
    st.lists(st.sampled_from([*"ab.Z_-", "py", "tar", "gz", "é"]), min_size=1, max_size=6)
    .map("".join)
    .filter(lambda name: name not in (".", ".."))
)
# What the intake sees: normalised workspace-relative paths.
_PATHS = st.lists(_NAMES, min_size=1, max_size=4).map("/".join)


@given(_PATHS)
def test_suffix_agrees_with_pathlib(path: str) -> None:
    assert suffix_of(path) == PurePosixPath(path).suffix


def test_language_from_the_extension_any_case() -> None:
    assert language_of("src/App.PY") == "python"
    assert language_of("src/.py") is None  # a dotfile named ".py" has no extension
    assert language_of("Makefile.") is None

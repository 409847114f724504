"""Whether a client's languageId is believed per document (lsp/languages.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.lsp.languages import ClientLanguages
from mplp_lsp.sources.files import language_of

NAMED = ["a.py", "Makefile", "data.json", "notes.txt", "x.ts", "y.tsx", "z.rs", "b.go", "c.md"]


def test_a_client_that_labels_each_document_is_believed() -> None:
    labels = ClientLanguages()
    for language_id, path in [
        ("python", "a.py"),
        ("cpp", "include/b.h"),  # a C header in a C++ project
        ("cpp", "src/b.cpp"),
        ("javascript", "app.jsx"),
        ("jsonc", "tsconfig.json"),
        ("shellscript", "LICENSE"),  # a name that says nothing
    ]:
        assert labels.seen(language_id, path) is False
    assert labels.per_document
    assert labels.language("cpp") == "cpp"


def test_one_id_for_unrelated_files_is_a_session_label() -> None:
    """eglot 1.9: every document gets the languageId of the mode the server started for."""
    labels = ClientLanguages()
    assert labels.seen("python", "/r/a.py") is False
    assert labels.seen("python", "/r/Makefile") is True
    assert not labels.per_document
    assert labels.language("python") is None
    assert labels.seen("python", "/r/data.json") is False  # it flips once


@given(st.lists(st.sampled_from(NAMED), min_size=1, max_size=20))
def test_labels_that_agree_with_the_names_are_always_believed(paths: list[str]) -> None:
    labels = ClientLanguages()
    for path in paths:
        labels.seen(language_of(path), path)
    assert labels.per_document


@given(st.lists(st.sampled_from(NAMED), min_size=2, max_size=20, unique=True))
def test_one_label_for_files_of_two_unrelated_languages_is_found(paths: list[str]) -> None:
    labels = ClientLanguages()
    for path in paths:
        labels.seen("fundamental", path)
    named = {language_of(p) for p in paths}
    related = all(a.startswith(b) or b.startswith(a) for a in named for b in named if a and b)
    assert labels.per_document is related


def test_names_that_say_a_language_without_an_extension() -> None:
    assert language_of("sub/Makefile") == "makefile"
    assert language_of("notes.txt") == "plaintext"
    assert language_of("Dockerfile") == "dockerfile"

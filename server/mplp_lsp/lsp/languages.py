"""Whether a client's ``languageId`` describes each document, or the whole session.

An event's language is its document's ``languageId``, else what the file's name says
(:func:`~mplp_lsp.sources.files.language_of`). Some clients send one id for every document of
a server: eglot 1.9 labels each file with the mode the server was started for, so a Makefile,
a ``.json`` and a ``.txt`` all arrive as ``python``. Such a client gives itself away by using
one id for files whose names say unrelated languages; from then on its ids are not believed
and each file's name decides. Related languages share an id legitimately (a C header in a C++
project is ``cpp``, a ``.jsx`` file may be ``javascript``): two languages are related when one
name starts with the other.
"""

from __future__ import annotations

from itertools import combinations

from mplp_lsp.sources.files import language_of


class ClientLanguages:
    """The language ids one client has sent, and what they are worth."""

    def __init__(self) -> None:
        self._named: dict[str, set[str]] = {}  # language id -> languages its files' names say
        self.per_document = True

    def seen(self, language_id: str | None, path: str) -> bool:
        """Note a document's id; True when this shows the ids are per session after all."""
        named = language_of(path)
        if not language_id or named is None or not self.per_document:
            return False
        group = self._named.setdefault(language_id, set())
        group.add(named)
        if any(not _related(a, b) for a, b in combinations(group, 2)):
            self.per_document = False
            return True
        return False

    def language(self, language_id: str | None) -> str | None:
        """The id to record for a document (None: let its name decide)."""
        return language_id or None if self.per_document else None


def _related(one: str, other: str) -> bool:
    return one.startswith(other) or other.startswith(one)

"""File activity, from any front end (editor or file-system watcher), into file_update events.

Front ends report raw observations; the debouncer folds each path's window into one
settled change; this module turns settled changes into payloads for the intake.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the language server asks language_of before initialize: no debouncer yet
    from mplp_lsp.sources.debounce import Settled

TIMESTAMP = "timestamp"
LANGUAGE = "language"

_LANGUAGE_BY_SUFFIX = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascriptreact",
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".json": "json",
    ".md": "markdown",
    ".rs": "rust",
    ".go": "go",
    ".java": "java",
    ".kt": "kotlin",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".lua": "lua",
    ".sh": "shellscript",
    ".bash": "shellscript",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".html": "html",
    ".css": "css",
    ".scss": "scss",
    ".sql": "sql",
    ".xml": "xml",
    ".vue": "vue",
    ".svelte": "svelte",
    ".txt": "plaintext",
    ".mk": "makefile",
    ".ini": "ini",
    ".pl": "perl",
    ".tex": "latex",
    ".rst": "restructuredtext",
}
# Names that say the language without an extension (VS Code's language ids).
_LANGUAGE_BY_NAME = {
    "Makefile": "makefile",
    "makefile": "makefile",
    "GNUmakefile": "makefile",
    "Dockerfile": "dockerfile",
    "CMakeLists.txt": "cmake",
}


def language_of(path: str) -> str | None:
    """The language a file's name says, if any."""
    by_name = _LANGUAGE_BY_NAME.get(path.rpartition("/")[2])
    return by_name or _LANGUAGE_BY_SUFFIX.get(suffix_of(path).lower())


def suffix_of(path: str) -> str:
    """``PurePosixPath(path).suffix`` of a normalised path, without building a path object
    (a burst has thousands)."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def line_delta(before: str, after: str) -> tuple[int, int]:
    """Lines added and removed, as a multiset difference of lines.

    Linear time, where a true diff is quadratic at worst; a moved line counts as unchanged.
    """
    old, new = Counter(before.splitlines()), Counter(after.splitlines())
    return sum((new - old).values()), sum((old - new).values())


def payload_for(
    settled: Settled, *, lines: tuple[int, int] | None = None, workspace_root: str | None = None
) -> dict[str, Any]:
    extra: Mapping[str, object] = settled.extra
    payload: dict[str, Any] = {
        "file_path": settled.path,
        "change_type": settled.change.value,
        "timestamp": extra[TIMESTAMP],
    }
    language = extra.get(LANGUAGE) or language_of(settled.path)
    if language and settled.change.value != "deleted":
        payload["language"] = language
    if lines is not None:
        payload["lines_added"], payload["lines_removed"] = lines
    if settled.previous_path is not None:
        payload["previous_path"] = settled.previous_path
    if workspace_root is not None:
        payload["workspace_root"] = workspace_root
    return payload


class EditorDocuments:
    """What the editor told us about the documents it has open, by workspace-relative path.

    Line counts compare the text saved now with the text of the last emitted event, so a
    window that folds many saves still reports the whole change once.
    """

    def __init__(self) -> None:
        self._language: dict[str, str] = {}
        self._saved: dict[str, str] = {}
        self._emitted: dict[str, str] = {}

    def opened(self, path: str, language_id: str | None, text: str) -> None:
        if language_id:
            self._language[path] = language_id
        self._saved.setdefault(path, text)
        self._emitted.setdefault(path, text)

    def saved(self, path: str, text: str | None) -> None:
        if text is not None:
            self._saved[path] = text

    def closed(self, path: str) -> None:
        self._language.pop(path, None)

    def forget_languages(self) -> None:
        """The editor's language ids turned out not to be per document: names decide."""
        self._language.clear()

    def renamed(self, old: str, new: str) -> None:
        for table in (self._language, self._saved, self._emitted):
            if old in table:
                table[new] = table.pop(old)

    def forget(self, path: str) -> None:
        for table in (self._language, self._saved, self._emitted):
            table.pop(path, None)

    def language(self, path: str) -> str | None:
        return self._language.get(path)

    def take_lines(self, path: str) -> tuple[int, int] | None:
        """Lines added/removed since the last emitted event; None when the text is unknown."""
        before, after = self._emitted.get(path), self._saved.get(path)
        if before is None or after is None:
            return None
        self._emitted[path] = after
        return line_delta(before, after)

"""The value state layer (VSL): ``async get(key)`` / ``async set(key, value)`` (spec §2.3).

A backend is chosen by URL (:func:`open_vsl`): ``memory://`` (the reference, an in-process
map), ``sqlite:///path`` (the default, transactional), ``file:///dir`` (one JSON file per
key). Every backend keeps the same contract, which one test suite checks against all three:

* keys are non-empty strings (:class:`VslKeyError` otherwise);
* values are JSON values; anything else is refused with :class:`VslValueError` before
  anything is stored, and what ``get`` returns is a fresh copy (changing it changes nothing);
* ``get`` of a missing key returns ``default`` (``None`` unless given);
* a ``set`` is visible to every later ``get``; concurrent writers never tear a value: each
  key holds one whole value that some writer set (last writer wins);
* ``async with vsl.transaction():`` groups writes: they all land or none do. Inside it, the
  task that opened it reads its own writes; other tasks wait for it to end. Only the sqlite
  backend survives a crash mid-transaction at the old or the new state (the file backend
  makes each single key atomic, not a group).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from mplp_lsp.values.base import ValueStateLayer, VslError, VslKeyError, VslValueError
from mplp_lsp.values.files import FileVsl
from mplp_lsp.values.memory import MemoryVsl
from mplp_lsp.values.sqlite import SqliteVsl

__all__ = [
    "FileVsl",
    "MemoryVsl",
    "SqliteVsl",
    "ValueStateLayer",
    "VslError",
    "VslKeyError",
    "VslValueError",
    "default_url",
    "open_vsl",
]


def default_url(state_dir: Path) -> str:
    """The default backend: a SQLite file beside the store (not the store: one writer each)."""
    return "sqlite:///" + str((state_dir / "vsl.sqlite3").absolute()).lstrip("/")


def open_vsl(url: str) -> ValueStateLayer:
    """The backend a URL names; :class:`VslError` for a scheme or path we cannot use."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    if parts.scheme == "memory":
        return MemoryVsl()
    if parts.scheme not in ("sqlite", "file"):
        raise VslError(f"unsupported VSL URL scheme {parts.scheme!r}: use memory, sqlite or file")
    if parts.netloc not in ("", "localhost") or not path.startswith("/"):
        raise VslError(f"{parts.scheme} VSL URL needs an absolute local path: {url!r}")
    if parts.scheme == "sqlite":
        return SqliteVsl(Path(path))
    return FileVsl(Path(path))

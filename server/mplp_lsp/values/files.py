"""The file-system VSL: one JSON file per key in a directory.

Each write goes to a temporary file that is flushed to disk and then renamed over the old
one (``os.replace``), so a key always holds a whole old or a whole new value. File names
encode the key: every byte outside ``[a-z0-9_-]`` is percent-encoded (so ``.``, ``..``, ``/``
and case-insensitive file systems cannot alias or escape: ``A`` and ``a`` stay two files),
and keys whose encoded form is too long for a file name are named by their SHA-256 instead.
The file keeps the key, so the hashed names stay checkable.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mplp_lsp.values.base import check_key, decode, encode
from mplp_lsp.values.staged import Staged

_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-_")
_MAX_NAME = 200  # below the 255-byte limit of common file systems, with room for ".json"


def file_name(key: str) -> str:
    encoded = "".join(
        chr(byte) if byte in _PLAIN else f"%{byte:02X}" for byte in key.encode("utf-8")
    )
    if len(encoded) > _MAX_NAME:
        return "sha256-" + hashlib.sha256(key.encode()).hexdigest() + ".json"
    return "k-" + encoded + ".json"


class FileVsl:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._staged = Staged(self._apply)

    async def get(self, key: str, default: Any = None) -> Any:
        check_key(key)
        async with self._staged.reading() as pending:
            text = pending.get(key)
            if text is None:
                text = await asyncio.to_thread(self._read, key)
        return default if text is None else decode(text)

    async def set(self, key: str, value: Any) -> None:
        await self._staged.write(check_key(key), encode(value))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self._staged.transaction():
            yield

    async def close(self) -> None:
        return None

    def _read(self, key: str) -> str | None:
        try:
            stored = json.loads((self.directory / file_name(key)).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        if stored.get("key") != key:  # a hashed name shared by another key: not ours
            return None
        return json.dumps(stored["value"], ensure_ascii=False, separators=(",", ":"))

    async def _apply(self, writes: dict[str, str]) -> None:
        await asyncio.to_thread(self._write_all, writes)

    def _write_all(self, writes: dict[str, str]) -> None:
        for key, text in writes.items():
            body = json.dumps({"key": key, "value": json.loads(text)}, ensure_ascii=False)
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(body)
                    out.flush()
                    os.fsync(out.fileno())
                Path(temp).replace(self.directory / file_name(key))
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        if writes:
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # the renames themselves survive a power cut
            finally:
                os.close(dir_fd)

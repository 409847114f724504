"""File activity the editor reports: file operations and watched-file changes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path

from mplp_lsp.lsp.feature import Feature, handles
from mplp_lsp.lsp.server import MplpLanguageServer

_YIELD_EVERY = 200
_SLICE_SECONDS = 0.005
_FIRST_RUN = 100
_EVERY_FILE = types.FileOperationRegistrationOptions(
    filters=[types.FileOperationFilter(pattern=types.FileOperationPattern(glob="**/*"))]
)
_WATCHED_CHANGE = {
    types.FileChangeType.Created: "created",
    types.FileChangeType.Changed: "modified",
    types.FileChangeType.Deleted: "deleted",
}


class FileOperationsFeature(Feature[MplpLanguageServer]):
    @handles(types.WORKSPACE_DID_CREATE_FILES, _EVERY_FILE)
    def did_create(self, params: types.CreateFilesParams) -> None:
        for created in params.files:
            self.server.activity("created", created.uri)

    @handles(types.WORKSPACE_DID_DELETE_FILES, _EVERY_FILE)
    def did_delete(self, params: types.DeleteFilesParams) -> None:
        for deleted in params.files:
            self.server.activity("deleted", deleted.uri)

    @handles(types.WORKSPACE_DID_RENAME_FILES, _EVERY_FILE)
    def did_rename(self, params: types.RenameFilesParams) -> None:
        for renamed in params.files:
            new_path = to_fs_path(renamed.new_uri)
            if new_path and Path(new_path).is_dir():
                # A renamed directory renames every file in it (the editor sends only the
                # directory): listed in a thread, observed in slices, so a directory of
                # 20,000 files does not hold up the requests that come meanwhile.
                self.server.spawn(
                    self._rename_directory(renamed.old_uri, new_path), "rename-directory"
                )
            else:
                self.server.activity("renamed", renamed.new_uri, previous=renamed.old_uri)

    async def _rename_directory(self, old_uri: str, new_path: str) -> None:
        pairs = await asyncio.to_thread(files_renamed_with, old_uri, new_path)
        for index, (old, new) in enumerate(pairs, 1):
            self.server.activity("renamed", new, previous=old)
            if index % _YIELD_EVERY == 0:
                await asyncio.sleep(0)

    @handles(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched(self, params: types.DidChangeWatchedFilesParams) -> None:
        # Routed and judged a run at a time (a directory's paths resolved once per run); a
        # run is a few milliseconds of work, however loaded the machine, and the requests
        # that came meanwhile are answered between runs: a 20,000-file burst must not stall
        # them.
        changes = params.changes
        run = _FIRST_RUN
        start = 0
        while start < len(changes):
            began = time.monotonic()
            batch = [
                (change, event.uri)
                for event in changes[start : start + run]
                if (change := _WATCHED_CHANGE.get(event.type)) is not None
            ]
            self.server.watched(batch)
            start += run
            if start < len(changes):
                run = _next_run(run, time.monotonic() - began)
                await asyncio.sleep(0)


def _next_run(run: int, took: float) -> int:
    """How many changes the next run takes for it to last about ``_SLICE_SECONDS``."""
    if took <= 0:
        return run * 2
    return max(1, min(run * 2, int(run * _SLICE_SECONDS / took)))


def files_renamed_with(old_uri: str, new_path: str) -> list[tuple[str, str]]:
    """(old URI, new URI) of every file now under the renamed directory ``new_path``."""
    pairs = []
    for folder, _dirs, files in os.walk(new_path):
        for name in files:
            relative = Path(folder, name).relative_to(new_path).as_posix()
            pairs.append((f"{old_uri.rstrip('/')}/{relative}", Path(folder, name).as_uri()))
    return pairs

"""File operations inside the workspace, each returning its inverse, each a file_update.

* write: the inverse restores the old bytes, or deletes the file if it was new;
* rename: refused onto an existing file (its inverse could not bring that file back); the
  inverse renames back;
* delete: the inverse writes the old bytes back.

Paths are resolved (symlinks included) and must stay inside the workspace, and every
operation goes through :mod:`mplp_lsp.sanitize.confined`, so a link swapped in afterwards is
refused (``path_symlink_escape``), never followed. Writes go to a temporary file that
replaces the target, so a file is never seen half written.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from mplp_lsp.actions.executor import ActionError, Handled, PendingEvent
from mplp_lsp.actions.kinds import FileAction
from mplp_lsp.actions.paths import relative_of
from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.result import ErrorCode
from mplp_lsp.sanitize import confined


def _restore(relpath: str, old: bytes | None) -> dict[str, Any]:
    if old is None:
        return {"type": "file", "op": "delete", "path": relpath}
    return {
        "type": "file",
        "op": "write",
        "path": relpath,
        "content_base64": base64.b64encode(old).decode("ascii"),
    }


class FileHandler:
    def __init__(self, root: Path) -> None:
        self.root = root

    async def __call__(self, action: FileAction) -> Handled:
        return await asyncio.to_thread(self._run, action)

    def _run(self, action: FileAction) -> Handled:
        relpath = relative_of(self.root, action.path, "action.path")
        try:
            if action.op == "write":
                return self._write(action, relpath)
            if action.op == "delete":
                old = confined.read_bytes(self.root, relpath)
                if old is None:
                    raise FileNotFoundError(2, "No such file or directory")
                confined.unlink(self.root, relpath)
                return Handled(
                    output={"path": relpath},
                    inverse=_restore(relpath, old),
                    events=[_changed(relpath, "deleted")],
                )
            return self._rename(action, relpath)
        except confined.PathEscape as escape:
            raise ActionError.single(escape.code, escape.message, "action.path") from None
        except OSError as exc:
            raise ActionError.single(
                ErrorCode.FILE_OP_FAILED, f"{action.op} {relpath}: {exc.strerror or exc}"
            ) from None

    def _write(self, action: FileAction, relpath: str) -> Handled:
        if (action.content is None) == (action.content_base64 is None):
            raise ActionError.single(
                ErrorCode.REQUIRED, "a write needs exactly one of content, content_base64"
            )
        if action.content is not None:
            data = action.content.encode("utf-8")
        else:
            try:
                data = base64.b64decode(action.content_base64 or "", validate=True)
            except ValueError:
                raise ActionError.single(
                    ErrorCode.FORMAT, "content_base64 is not base64", "action.content_base64"
                ) from None
        old = confined.read_bytes(self.root, relpath)
        confined.write_bytes(self.root, relpath, data, prefix=".mplp-")
        change = "created" if old is None else "modified"
        return Handled(
            output={"path": relpath, "bytes": len(data)},
            inverse=_restore(relpath, old),
            events=[_changed(relpath, change)],
        )

    def _rename(self, action: FileAction, relpath: str) -> Handled:
        if action.to is None:
            raise ActionError.single(ErrorCode.REQUIRED, "a rename needs `to`", "action.to")
        new_rel = relative_of(self.root, action.to, "action.to")
        if confined.exists(self.root, new_rel):
            raise ActionError.single(
                ErrorCode.FILE_OP_FAILED, f"rename {relpath}: {new_rel} already exists"
            )
        if not confined.exists(self.root, relpath):
            raise ActionError.single(ErrorCode.FILE_OP_FAILED, f"rename {relpath}: no such file")
        confined.rename(self.root, relpath, new_rel)
        return Handled(
            output={"path": new_rel, "previous_path": relpath},
            inverse={"type": "file", "op": "rename", "path": new_rel, "to": relpath},
            events=[_changed(new_rel, "renamed", previous=relpath)],
        )


def _changed(relpath: str, change_type: str, previous: str | None = None) -> PendingEvent:
    payload = {"file_path": relpath, "change_type": change_type, "timestamp": utc_timestamp()}
    if previous is not None:
        payload["previous_path"] = previous
    return PendingEvent(Kind.FILE_UPDATE, payload)

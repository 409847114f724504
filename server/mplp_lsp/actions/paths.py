"""Where actions may touch the file system: inside the workspace, after resolving symlinks."""

from __future__ import annotations

from pathlib import Path

from mplp_lsp.actions.executor import ActionError
from mplp_lsp.sanitize.paths import PathRejected, relative_path


def inside(root: Path, raw: str, field: str) -> Path:
    """``raw`` (relative to ``root``, or absolute) as a path inside the workspace."""
    return root / relative_of(root, raw, field)


def relative_of(root: Path, raw: str, field: str) -> str:
    try:
        _root, relpath = relative_path(raw, [root])
    except PathRejected as rejected:
        raise ActionError(rejected.to_result(field)) from None
    return relpath

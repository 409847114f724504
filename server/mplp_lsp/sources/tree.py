"""The files of a workspace tree as the daemon records them, listed a slice at a time.

Run on a worker thread: listing is ``os.scandir`` (:func:`~mplp_lsp.sources.fswatch.files_under`)
with ignored directories pruned and ignored files left out by the same rules the live sources
use, so a listing never names a path the daemon would not record.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from mplp_lsp.drift.scan import per_directory
from mplp_lsp.ignore.rules import IgnoreRules
from mplp_lsp.sources.fswatch import files_under

SLICE = 1024  # paths decided, stored or learnt together: what bounds memory in a rescan


def recordable_files(root: str, rules: IgnoreRules, top: str = "") -> Iterator[str]:
    """Root-relative paths of the regular files below ``top`` ("" for the whole tree)."""
    cut = len(root) + 1
    start = f"{root}/{top}" if top else root
    ignored = per_directory(rules.files_in)
    for path in files_under(start, lambda directory: rules.is_ignored(directory[cut:] + "/")):
        relative = path[cut:]
        if not ignored(relative):
            yield relative


def slices(paths: Iterator[str], size: int = SLICE) -> Iterator[list[str]]:
    """The paths in lists of at most ``size``; pulling one slice lists only that much."""
    while chunk := list(itertools.islice(paths, size)):
        yield chunk

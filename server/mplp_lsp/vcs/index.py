"""What Git's index already knows about a worktree's files: their blob ids.

The index holds, for every tracked file, the object id of its staged content. Where the
file on disk still has that content, the id is a content hash of the file that costs
nothing to learn; ``git diff-files`` (which consults the index's stat data, and compares
content where the stat data cannot tell) names the files where it does not. Git runs in the
controlled environment of :mod:`mplp_lsp.vcs.repo` (no fsmonitor hook, no optional locks:
the index is read, never refreshed or written).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from mplp_lsp.vcs.repo import GitRepo, RepoRefused

log = logging.getLogger(__name__)

_REGULAR_MODES = ("100644", "100755")  # not symlinks (120000), not submodules (160000)


@dataclass(frozen=True, slots=True)
class IndexBlobs:
    """The blob ids the index holds, and which worktree files Git found different."""

    staged: dict[str, str] = field(default_factory=dict)  # path -> blob id (stage 0)
    dirty: frozenset[str] = frozenset()

    def clean(self, path: str) -> str | None:
        """The blob id of the file's content on disk, when Git found it unchanged."""
        return None if path in self.dirty else self.staged.get(path)


def index_blobs(root: Path) -> IndexBlobs:
    """The index's blob ids of the regular files below ``root`` (root-relative paths), and
    the files whose content on disk differs from them (as far as Git could tell when asked).
    Empty without a usable repository."""
    try:
        repo = GitRepo.open(root)
    except RepoRefused:
        return IndexBlobs()
    try:
        staged = repo.run_fed("-C", str(root), "ls-files", "-z", "--stage", stdin="")
        dirty = repo.run_fed(
            "-C", str(root), "diff-files", "-z", "--name-only", "--relative", stdin=""
        )
    except Exception as error:  # git refused (a damaged index, say): no ids, files get hashed
        log.warning("the Git index could not be read (%s); hashing the files instead", error)
        return IndexBlobs()
    finally:
        repo.close()
    return IndexBlobs(_blobs(staged), frozenset(dirty.split("\0")))


def _blobs(staged: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for record in staged.split("\0"):
        info, tab, path = record.partition("\t")
        if not tab:
            continue
        fields = info.split(" ")
        if len(fields) == 3 and fields[0] in _REGULAR_MODES and fields[2] == "0":
            out[path] = fields[1]
    return out

"""Finding a work tree's git dir from the files alone (``.git`` directory or gitfile)."""

from __future__ import annotations

from pathlib import Path


def find_git_dir(root: Path) -> tuple[Path, Path | None] | None:
    """``(top, git dir)`` of the repository holding ``root``, or None outside any repository.

    The git dir is None when ``.git`` is a file that does not name one (unreadable, or not
    a ``gitdir:`` line).
    """
    for top in (root, *root.parents):
        dotgit = top / ".git"
        if dotgit.is_dir():
            return top, dotgit
        if dotgit.exists():
            return top, gitfile_target(dotgit)
    return None


def gitfile_target(dotgit: Path) -> Path | None:
    """The git dir a ``.git`` file (a linked worktree's or a submodule's) points at."""
    try:
        first = dotgit.read_text(encoding="utf-8").partition("\n")[0]
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith("gitdir:"):
        return None
    target = Path(first.removeprefix("gitdir:").strip())
    return target if target.is_absolute() else dotgit.parent / target

"""Three-way merge of a drifted file with ``git merge-file``.

Roles: *ours* is the file on disk, *theirs* the content the PSG recorded, and the *base*
(common ancestor) the file's blob at the repository's HEAD — the last state both sides
started from. Without one (no repository, or a file Git does not track) the base is empty,
so any region where the two sides differ conflicts. The result is written over the disk
file; conflicts are left as standard markers for the user.

Git runs with a controlled environment: no pager, no terminal prompt, no system or global
configuration (so no external diff or textconv drivers), and a fixed locale.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_TIMEOUT = 30.0


def git_env() -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_OPTIONAL_LOCKS": "0",
    }
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    return env


def head_blob(root: Path, path: str) -> bytes | None:
    """The file's content at HEAD, or None (no repository, untracked, no commits)."""
    return _blob(root, f"HEAD:./{path}")


def object_blob(root: Path, oid: str) -> bytes | None:
    """The content of the blob with this object id, or None (no repository, no such blob)."""
    if not oid.isalnum():
        return None  # an id is hex; nothing else reaches git's argument list
    return _blob(root, oid)


def _blob(root: Path, name: str) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "cat-file", "blob", name],
            capture_output=True,
            env=git_env(),
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass(frozen=True, slots=True)
class MergeResult:
    content: bytes
    conflicts: int  # 0: merged cleanly


def merge(ours: bytes, base: bytes | None, theirs: bytes, *, name: str) -> MergeResult:
    with tempfile.TemporaryDirectory(prefix="mplp-merge-") as scratch:
        files = []
        for label, data in (("disk", ours), ("base", base or b""), ("psg", theirs)):
            target = Path(scratch, label)
            target.write_bytes(data)
            files.append(str(target))
        done = subprocess.run(
            [
                "git",
                "merge-file",
                "-p",
                "-L",
                f"{name} (disk)",
                "-L",
                f"{name} (HEAD)",
                "-L",
                f"{name} (PSG)",
                *files,
            ],
            capture_output=True,
            env=git_env(),
            timeout=_TIMEOUT,
            check=False,
        )
    if done.returncode < 0 or done.returncode > 127:
        raise RuntimeError(f"git merge-file failed: {done.stderr.decode(errors='replace')}")
    return MergeResult(done.stdout, done.returncode)

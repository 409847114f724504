"""A generated source tree for the drift benchmarks: N files of 100-4,000 B of Python-like
text, 100 files per directory in two directory levels, committed in a fresh Git repository."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

_PER_DIR = 100
_DIRS_PER_LEVEL = 100
_GITIGNORE = "__pycache__/\n*.py[cod]\nnode_modules/\nbuild/\n*.log\n"


def relative_paths(files: int) -> list[str]:
    paths = []
    for index in range(files):
        directory = index // _PER_DIR
        top, sub = divmod(directory, _DIRS_PER_LEVEL)
        paths.append(f"pkg{top:03d}/mod{sub:03d}/file{index % _PER_DIR:03d}.py")
    return paths


def text(rng: random.Random, index: int) -> bytes:
    lines = [f"# module {index}\n"]
    size = rng.randint(100, 4000)
    while sum(len(line) for line in lines) < size:
        lines.append(f"def f{len(lines)}(x):\n    return x * {rng.randint(0, 999)}\n")
    return "".join(lines).encode()[:size]


def make_tree(root: Path, files: int, *, seed: int = 7) -> list[str]:
    """Create (or reuse, if it already holds ``files`` files) the tree; its relative paths."""
    paths = relative_paths(files)
    marker = root / ".git" / "bench-files"
    if marker.is_file() and marker.read_text() == str(files):
        return paths
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for index, relative in enumerate(paths):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text(rng, index))
    (root / ".gitignore").write_text(_GITIGNORE)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "tree"], check=True, env=env)
    marker.write_text(str(files))
    subprocess.run(["git", "-C", str(root), "update-index", "--refresh", "-q"], env=env)
    return paths

"""Real Git repositories in temp dirs for the tests and benchmarks.

:meth:`Repo.existing` is the repository a user opens: files in folders and history, made
before any daemon starts. Tests of what the daemon records start from it by default (the
e2e ``workspace`` fixture), because a folder that only holds what the test itself creates
hides everything the daemon gets wrong about files it found there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BASE_ENV = {
    "GIT_AUTHOR_NAME": "Ada Example",
    "GIT_AUTHOR_EMAIL": "ada@example.org",
    "GIT_COMMITTER_NAME": "Ada Example",
    "GIT_COMMITTER_EMAIL": "ada@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._clock = 1_767_225_600  # each commit one minute later: a stable, known order

    @classmethod
    def create(cls, path: Path) -> Repo:
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path.resolve())
        repo.git("init", "-q", "-b", "main")
        return repo

    @classmethod
    def existing(cls, path: Path) -> Repo:
        """A repository with history: :data:`EXISTING_FILES` committed in three commits, one
        file added and not committed, one untracked, and ignored build output."""
        repo = cls.create(path)
        for message, names in _HISTORY:
            for name in names:
                repo.write(name, EXISTING_FILES[name])
            repo.git("add", "--", *names)
            repo.git("commit", "-q", "-m", message)
        for name, text in _NOT_COMMITTED.items():
            repo.write(name, text)
        repo.git("add", "--", STAGED)
        return repo

    def write(self, name: str, text: str) -> Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def files(self) -> set[str]:
        """Every file a daemon records here: the regular files on disk, tracked or not,
        that Git does not ignore."""
        listed = self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return {
            name
            for name in listed.split("\0")
            if name and (self.path / name).is_file() and not (self.path / name).is_symlink()
        }

    def git(self, *args: str, stdin: str | None = None) -> str:
        self._clock += 60
        env = {**os.environ, **BASE_ENV}
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{self._clock} +0000"
        done = subprocess.run(
            ["git", *args],
            cwd=self.path,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def commit(self, message: str, name: str = "file.txt") -> str:
        with (self.path / name).open("a", encoding="utf-8") as handle:
            handle.write(f"{message}\n")
        self.git("add", name)
        self.git("commit", "-q", "-m", message)
        return self.rev("HEAD")

    def rev(self, name: str) -> str:
        return self.git("rev-parse", name).strip()


EXISTING_FILES = {
    ".gitignore": "build/\n*.log\n",
    "README.md": "# project\n\nA small project.\n",
    "pyproject.toml": '[project]\nname = "project"\nversion = "0.1.0"\n',
    "src/app.py": "from src import util\n\nprint(util.greet('x'))\n",
    "src/util.py": "def greet(name):\n    return 'hello ' + name\n",
    "src/pkg/__init__.py": "",
    "src/pkg/model.py": "class Model:\n    pass\n",
    "docs/guide.md": "# Guide\n\nRead the code.\n",
    "docs/notes.md": "notes\n",
    "tests/test_app.py": "def test_app():\n    assert True\n",
}
_HISTORY = (
    ("initial layout", (".gitignore", "README.md", "pyproject.toml", "src/app.py")),
    ("add the helpers", ("src/util.py", "src/pkg/__init__.py", "src/pkg/model.py")),
    ("docs and tests", ("docs/guide.md", "docs/notes.md", "tests/test_app.py")),
)
STAGED = "src/staged.py"  # added to the index, never committed
_NOT_COMMITTED = {
    STAGED: "STAGED = True\n",
    "scratch.txt": "an untracked file\n",
    "build/out.bin": "ignored build output\n",
    "debug.log": "ignored log\n",
}

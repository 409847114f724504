"""Real Git repositories in temp dirs for the Git source tests and benchmarks."""

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

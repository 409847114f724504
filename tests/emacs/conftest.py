"""Fixtures of the real Emacs suite: both LSP clients, and a repository with history."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.nvim_session import git_repo
from tests.emacs.host import CLIENTS, Client

# What a user's repository holds before the editor starts: files of several languages, committed.
FILES = {
    "a.py": "a = 1\n",
    "Makefile": "all:\n\ttrue\n",
    "data.json": "{}\n",
    "notes.txt": "notes\n",
    "src/lib.py": "def f():\n    return 1\n",
}


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest) -> Client:
    value: Client = request.param
    return value


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "project", FILES)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"

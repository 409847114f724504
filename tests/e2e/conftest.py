from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import Repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """The repository a user opens: files and history from before any daemon starts."""
    return Repo.existing(tmp_path / "project")


@pytest.fixture
def workspace(repo: Repo) -> Path:
    return repo.path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"

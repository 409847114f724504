"""Shared test fixtures: the project's own payload fixtures and the upstream reference data."""

from __future__ import annotations

import copy
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from mplp_lsp.store.database import connect
from tests.dist import Dist, build
from tests.required import unavailable
from tests.support.properties import describe, examples

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

# Every test is in one tier (CONTRIBUTING.md says which to write): ``unit`` (in-process, the
# fast tier a contributor runs before each commit: ``pytest -m unit``), ``e2e`` (real
# processes: the daemon, git, collectors, PostgreSQL) or ``realhost`` (a real editor or browser:
# code-server, Neovim, Emacs, Chromium). A module's own ``pytestmark`` names its tier; otherwise
# its folder does.
TIERS = ("unit", "e2e", "realhost")

# No time limit per hypothesis example: the 200 ms default is a timing threshold, which a
# shared or loaded machine crosses (a flaky failure that says nothing of the code); the
# per-test timeout (pyproject.toml) still bounds a test that hangs.
# A test without its own count tries hypothesis's default (100) in CI, a share elsewhere.
settings.register_profile("mplp-lsp", deadline=None, max_examples=examples(100))
settings.load_profile("mplp-lsp")
FOLDER_TIERS = {"unit": "unit", "vscode": "realhost", "emacs": "realhost", "ui": "realhost"}
FIXTURES = Path(__file__).resolve().parent / "fixtures"
PAYLOAD_FILES = {
    "tool": "tool.json",
    "file_update": "file_update.json",
    "git": "git.json",
    "ci": "ci.json",
    "pipeline_stage": "pipeline_stage.json",
    "graph_update": "graph_update.json",
    "runtime_execution": "runtime_execution.json",
}


def sample(kind: str) -> dict[str, Any]:
    """A fresh copy of the project's valid fixture of this kind."""
    data: dict[str, Any] = json.loads((FIXTURES / "payloads" / PAYLOAD_FILES[kind]).read_text())
    return copy.deepcopy(data)


def reference_dir() -> Path | None:
    """The upstream MPLP reference data: beside the checkout, or MPLP_REFERENCE_DIR."""
    configured = os.environ.get("MPLP_REFERENCE_DIR")
    candidate = Path(configured) if configured else REPO.parent / "shared" / "reference" / "mplp"
    return candidate if candidate.is_dir() else None


# What a contributor without the data reads (CONTRIBUTING.md says the same).
MISSING_REFERENCE = (
    "the upstream MPLP v1.0 reference data (the public MPLP protocol repository's schemas/, "
    "examples/ and tests/golden/ folders) is not at ../shared/reference/mplp beside this "
    "checkout: put a copy there, or set MPLP_REFERENCE_DIR to one"
)


def require_reference() -> Path:
    """The reference data; without it the test skips with how to get it (fails under CI)."""
    found = reference_dir()
    if found is None:
        unavailable(MISSING_REFERENCE)
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tiers = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
        if not tiers:
            folder = item.path.relative_to(TESTS).parts[0]
            tier = FOLDER_TIERS.get(folder, "e2e")
            item.add_marker(tier)
            tiers = {tier}
        if len(tiers) != 1:
            raise pytest.UsageError(f"{item.nodeid}: in tiers {sorted(tiers)}; one only")
        if ("unit" in tiers) != (item.path.relative_to(TESTS).parts[0] == "unit"):
            raise pytest.UsageError(f"{item.nodeid}: unit tests, and only they, live in tests/unit")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``pytest -m unit`` reads tests/unit alone (the unit tier is that folder, checked above):
    importing the real-process suites' modules only to deselect them took a fifth of its time."""
    if config.getoption("markexpr") != "unit":
        return None
    in_tests = collection_path.parent == TESTS and collection_path.is_dir()
    return True if in_tests and collection_path.name != "unit" else None


@pytest.fixture
def reference() -> Path:
    return require_reference()


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """A real store shared by one module's tests: each test (and each hypothesis example)
    empties the tables it fills before it stores anything."""
    connection = connect(Path(tmp_path_factory.mktemp("store")) / "events.db")
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def built_dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist and wheel of this checkout, built once for every test that installs them."""
    return build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(autouse=True, scope="session")
def _no_user_configuration(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The tester's own settings must not change what the tests see, nor the tests touch the
    tester's own data; child processes inherit this environment. Their mplp-lsp settings (config
    file, MPLP_LSP_* variables), stores (XDG_STATE_HOME) and kept answers to initialize
    (MPLP_LSP_CACHE_DIR), and their Git configuration (a
    global `commit.gpgsign`, `core.hooksPath` or identity, or none at all on a fresh machine):
    Git gets a global file of the tests' own, with an identity, and no system file."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    os.environ["MPLP_LSP_CACHE_DIR"] = str(tmp_path_factory.mktemp("mplp-cache"))
    git_config = tmp_path_factory.mktemp("git") / "config"
    git_config.write_text(TEST_GIT_CONFIG)
    os.environ["GIT_CONFIG_GLOBAL"] = str(git_config)
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    from mplp_lsp.config.settings import SETTING_NAMES
    from mplp_lsp.config.sources import env_name

    for name in SETTING_NAMES:
        if name != "state_dir":  # a CI may point every store elsewhere on purpose
            os.environ.pop(env_name(name), None)


TEST_GIT_CONFIG = """\
[user]
\tname = mplp-lsp tests
\temail = tests@mplp-lsp.example
"""


def pytest_report_header() -> str:
    return describe()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Workers for ``-n auto``: none for a run narrowed to files or tests, the cores otherwise.

    Starting workers costs a few seconds, which a tier (``pytest -m unit``) wins back many
    times over and a single file does not; a narrowed run also keeps ``-s`` and breakpoints
    simple. ``None`` leaves the count to pytest-xdist (the machine's cores).
    """
    narrowed = any("::" in arg or not Path(arg).is_dir() for arg in config.args)
    return 0 if narrowed else None

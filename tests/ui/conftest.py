"""Fixtures of the dashboard suite: Debian's Chromium through Playwright, one daemon per
module, and the screenshots the docs show (kept in MPLP_LSP_ARTIFACTS when set)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, launched_browser
from tests.support.otlp import Receiver, receiving_in_a_thread
from tests.support.waiting import wait_until
from tests.ui.daemon import Remote, Watch, base_env


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser(chromium())


@pytest.fixture(scope="session")
def pictures() -> Path:
    """Where the screenshots go (MPLP_LSP_ARTIFACTS, else a temp dir)."""
    configured = os.environ.get("MPLP_LSP_ARTIFACTS")
    folder = Path(configured) if configured else Path(tempfile.mkdtemp(prefix="mplp-ui-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def git(workspace: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", "-C", str(workspace), *args], check=True, capture_output=True, env=env)


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    server = Remote()
    yield server
    server.close()


@pytest.fixture(scope="module")
def otlp() -> Iterator[Receiver]:
    """An OTLP receiver beside the remote; it refuses every batch (403) until a test says."""
    with receiving_in_a_thread() as receiver:
        receiver.status = 403
        yield receiver


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, remote: Remote, otlp: Receiver
) -> Iterator[Watch]:
    """A watched Git workspace forwarding to a refusing remote and a refusing OTLP receiver,
    with one drift finding: ``notes.txt`` was recorded by a first run and changed on disk
    before this one."""
    root = tmp_path_factory.mktemp("ui")
    workspace, state = root / "workspace", root / "state"
    workspace.mkdir()
    env = base_env(root)
    git(workspace, env, "init", "-q", "-b", "main")
    first = Watch.start(workspace, state, env)
    (workspace / "notes.txt").write_text("as recorded\n")
    (workspace / "README.md").write_text("# demo\n")
    git(workspace, env, "add", "-A")
    git(workspace, env, "commit", "-qm", "first commit")
    wait_until(lambda: first.printed("notes.txt"), what="notes.txt recorded")
    wait_until(lambda: first.printed("commit"), what="the commit recorded")
    first.stop()
    (workspace / "notes.txt").write_text("changed while nothing watched\n")
    watch = Watch.start(
        workspace, state, {**env, "MPLP_LSP_OTLP_ENDPOINT": otlp.url}, "--remote", remote.url
    )
    wait_until(lambda: watch.get("/ui/api/drift")["drifts"], what="the drift finding")
    yield watch
    watch.stop()
    # Pages that came and went (closed streams included) left no traceback behind.
    assert not [line for line in watch.lines if "Traceback" in line or "Error" in line]

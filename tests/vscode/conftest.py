"""Fixtures of the real VS Code suite; a screenshot and the logs are kept when a test fails."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, launched_browser
from tests.vscode.host import (
    CodeServer,
    base_settings,
    code_server,
    code_server_dir,
    packaged_vsix,
)
from tests.vscode.workbench import Workbench

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


@dataclass
class Host:
    """One opened folder in one real VS Code, and the store its server records into."""

    workspace: Path
    state_dir: Path
    server: CodeServer
    bench: Workbench
    env: dict[str, str]
    artefacts: Path

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`mplp-lsp ARGS` on this workspace's store, run from outside the workspace."""
        return subprocess.run(
            [sys.executable, "-I", "-m", "mplp_lsp", *args, "--workspace", str(self.workspace)],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.state_dir.parent,
            check=check,
            timeout=60,
        )


def git(workspace: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(workspace), *args],
        check=True,
        capture_output=True,
        env={**os.environ, **GIT_ENV},
    )


@pytest.fixture(scope="session")
def artefacts() -> Path:
    """Where screenshots and logs of failed tests go (MPLP_LSP_ARTIFACTS, else a temp dir)."""
    configured = os.environ.get("MPLP_LSP_ARTIFACTS")
    folder = Path(configured) if configured else Path(tempfile.mkdtemp(prefix="mplp-vscode-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def code_server_root() -> Path:
    packaged_vsix()  # without a packaged extension, skip before a first-time setup
    return code_server_dir()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser(chromium())


@contextlib.contextmanager
def open_host(
    root: Path,
    browser: Any,
    tmp: Path,
    workspace: Path,
    artefacts: Path,
    settings: dict[str, Any] | None = None,
    *,
    vsix: Path | None = None,
    environment: dict[str, str] | None = None,
) -> Iterator[Host]:
    """Start code-server with the packaged extension and open ``workspace`` in a browser tab.

    The server the extension starts inherits code-server's environment (``os.environ``, or
    ``environment``), so MPLP_LSP_STATE_DIR puts the store in ``tmp``. When the body fails,
    its screenshot and logs are kept (a module's shared host: see the report hook below).
    """
    state_dir = tmp / "state"
    env = {**(os.environ if environment is None else environment)}
    env["MPLP_LSP_STATE_DIR"] = str(state_dir)
    profile = tmp / "profile"
    extension = vsix or packaged_vsix()
    with code_server(root, profile, extension, settings or base_settings(), env) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        host = Host(workspace, state_dir, server, Workbench(page), env, artefacts)
        try:
            page.goto(server.url(workspace))
            host.bench.wait_ready()
            yield host
        except BaseException as error:
            if not isinstance(error, pytest.skip.Exception):
                folder = artefacts / current_test()
                keep(host, folder)
                print(f"real VS Code artefacts: {folder}", file=sys.stderr)
            raise
        finally:
            page.close()


def current_test() -> str:
    """The running test's name (with its parameters), as a folder name."""
    running = os.environ.get("PYTEST_CURRENT_TEST", "unknown").split(" ")[0]
    return running.rsplit("::", 1)[-1].replace("/", "_")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        host = item.funcargs.get("host")  # type: ignore[attr-defined]
        if isinstance(host, Host):
            folder = host.artefacts / item.name
            keep(host, folder)
            report.sections.append(("real VS Code artefacts", str(folder)))
    return report


def keep(host: Host, folder: Path) -> None:
    """For a failed test: a screenshot, every log of the profile (the MPLP output channel holds
    the server's stderr), code-server's own log, and what the state dir holds."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        host.bench.page.screenshot(path=str(folder / "screenshot.png"))
    except Exception as error:  # a crashed or closed page still leaves the logs
        (folder / "screenshot-failed.txt").write_text(str(error))
    (folder / "MPLP.log").write_text(host.server.extension_log())
    logs = host.server.profile / "logs"
    if logs.is_dir():
        shutil.copytree(logs, folder / "logs", dirs_exist_ok=True)
    log = host.server.profile / "code-server.log"
    if log.exists():
        shutil.copy(log, folder / "code-server.log")
    listing = sorted(str(p.relative_to(host.state_dir)) for p in host.state_dir.rglob("*"))
    (folder / "state-dir.txt").write_text("\n".join(listing) + "\n")

"""VS Code's "MPLP: Open event log" terminal never runs a workspace's planted python3.

A real VS Code (code-server with the packaged extension, through Chromium) whose PATH has
a relative entry first (``bin``) and whose interpreter setting is a bare ``python3``, on a
workspace with an executable ``bin/python3`` that leaves a marker. The terminal the command
opens runs ``mplp-lsp events --follow`` with the interpreter resolved through the PATH's
absolute entries, from the extension's own folder, like every other process the extension
starts: the marker never appears, and the process that follows the events is the real
interpreter, outside the workspace.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until
from tests.vscode.conftest import artefacts as artefacts
from tests.vscode.conftest import browser as browser
from tests.vscode.conftest import code_server_root as code_server_root
from tests.vscode.conftest import open_host
from tests.vscode.host import argv_of, base_settings

pytestmark = pytest.mark.realhost

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def follower(workspace: Path) -> int | None:
    """The pid of the ``events --follow`` process for ``workspace``."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = argv_of(int(proc.name))
            except OSError:
                continue
            if "events" in argv and "--follow" in argv and str(workspace) in argv:
                return int(proc.name)
    return None


def test_the_event_log_terminal_never_runs_a_planted_python(
    code_server_root: Path,
    browser: Any,
    tmp_path: Path,
    artefacts: Path,
) -> None:
    workspace = tmp_path / "project"
    (workspace / "bin").mkdir(parents=True)
    marker = tmp_path / "planted-python-ran"
    planted = workspace / "bin" / "python3"
    planted.write_text(f'#!/bin/sh\necho planted > {marker}\nexec {sys.executable} "$@"\n')
    planted.chmod(0o755)
    (workspace / "notes.txt").write_text("notes\n")
    # VS Code gives extensions the environment of a login shell: the relative entry goes
    # where a user's would, in the shell's start-up file (the test venv's folder with it,
    # for its mplp-lsp), under a HOME of the test's own.
    home = tmp_path / "home"
    home.mkdir()
    venv_bin = str(Path(sys.executable).parent)
    for profile in (".profile", ".bash_profile"):
        (home / profile).write_text(f'PATH="bin:{venv_bin}:$PATH"; export PATH\n')
    environment = {"HOME": str(home), "PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
    settings = base_settings(interpreter="python3")
    with open_host(
        code_server_root, browser, tmp_path, workspace, artefacts, settings,
        environment=environment,
    ) as host:  # fmt: skip
        try:
            wait_until(lambda: host.bench.events_today() is not None, what="the server recording")
        except AssertionError:
            print(host.server.extension_log())
            raise
        host.bench.command("MPLP: Open event log")
        pid = wait_until(lambda: follower(workspace), what="the event log's process")
        time.sleep(1)  # what a planted python3 would have done by now
        assert not marker.exists(), "the workspace's bin/python3 ran"
        assert Path(os.readlink(f"/proc/{pid}/cwd")) != workspace
        assert not Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(workspace)
        assert argv_of(pid)[0] == str(Path(venv_bin) / "python3")

"""The linux-x64 .vsix on a machine that has only a system Python 3.11 and no mplp-lsp.

A fresh code-server profile, no `mplp.*` setting at all, and a PATH of the system's folders
only (no test venv, no pyenv): the extension must find `python3`, run the server it brings
in `bundled/`, and record a save. The server process is inspected to show that it is the
system interpreter running the bundle's compiled modules, and nothing of the test venv. Without
a Python the extension says what to install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until
from tests.vscode.conftest import git, open_host
from tests.vscode.host import (
    EXTENSION_DIR,
    argv_of,
    bundled_vsix,
    editor_settings,
    server_processes,
    unavailable,
)

pytestmark = pytest.mark.realhost

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def system_python() -> tuple[str, str]:
    """The `python3` of the system's folders (3.11 or newer, without mplp_lsp), and its
    compiled modules' tag (`cpython-311`)."""
    python = shutil.which("python3", path=SYSTEM_PATH)
    if python is None:
        unavailable("no python3 in the system's folders")
    probe = (
        "import sys, importlib.util as u; "
        "print(sys.version_info >= (3, 11), u.find_spec('mplp_lsp') is None, sys.implementation.cache_tag)"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    usable, clean, tag = done.stdout.split()
    if usable != "True" or clean != "True":
        unavailable(f"{python} is older than 3.11 or has mplp_lsp installed")
    return python, tag


def test_the_bundled_server_starts_with_no_setting_and_records_a_save(
    code_server_root: Path,
    browser: Any,
    tmp_path: Path,
    artefacts: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vsix = bundled_vsix()
    python, tag = system_python()
    workspace = tmp_path / "project"
    workspace.mkdir()
    git(workspace, "init", "-q")
    (workspace / "notes.txt").write_text("notes\n")
    # VS Code gives extensions the environment of a login shell: a HOME of its own keeps this
    # machine's shell start-up files (a pyenv, a venv) out of it.
    home = tmp_path / "home"
    home.mkdir()
    environment = {
        "HOME": str(home),
        "PATH": SYSTEM_PATH,
        "LANG": "C.UTF-8",
    }
    venv = Path(sys.prefix)

    started = time.monotonic()
    with open_host(
        code_server_root,
        browser,
        tmp_path,
        workspace,
        artefacts,
        editor_settings(),
        vsix=vsix,
        environment=environment,
    ) as host:
        [pid] = wait_until(
            lambda: server_processes(host.state_dir) or None, what="the server process"
        )
        argv = argv_of(pid)
        # `python3` found on the PATH (by its absolute folders, so never a relative entry),
        # isolated (-I) and without site-packages (-S).
        assert Path(argv[0]).is_absolute() and Path(argv[0]).name == "python3", argv
        assert argv[1:3] == ["-I", "-S"], argv
        launcher = Path(argv[3])
        assert launcher.name == "launch.py"
        assert launcher.is_relative_to(host.server.profile / "extensions"), launcher
        assert argv[4:] == ["serve"]
        assert os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(python)
        # The login shell's PATH (code-server's CLI folder, the system's folders): no venv.
        environ = dict(
            entry.split("=", 1)
            for entry in Path(f"/proc/{pid}/environ").read_text().split("\0")
            if "=" in entry
        )
        for folder in environ["PATH"].split(os.pathsep):
            assert not Path(folder).is_relative_to(venv), environ["PATH"]
            assert not (Path(folder) / "activate").exists(), environ["PATH"]

        host.bench.open_file("notes.txt")
        host.bench.type_at_end("typed in VS Code\n")
        host.bench.save()
        wait_until(
            lambda: saved(host.cli("events", "--json").stdout), what="the save's file_update"
        )
        elapsed = time.monotonic() - started

        # Every compiled module the server loaded is the bundle's, for this Python; none is the
        # test venv's.
        mapped = {
            line.split()[-1]
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if line.split()[-1].endswith(".so")
        }
        bundled = launcher.parent / "libs"
        assert any(Path(path).is_relative_to(bundled) and f".{tag}-" in path for path in mapped), (
            mapped
        )
        assert not any(Path(path).is_relative_to(venv) for path in mapped), mapped
        # The version the .vsix reports is its manifest's (tests/e2e/test_release_artefacts.py:
        # and the wheel's, installed with pipx).
        version = json.loads((EXTENSION_DIR / "package.json").read_text())["version"]
        # The system's python3, named by its full path: the extension resolves it on the PATH
        # itself, so the workspace folder (the terminal's cwd) cannot plant one.
        assert f"starting the bundled mplp-lsp {version} with {python} (the default)" in (
            host.server.extension_log()
        ), host.server.extension_log()
    with capsys.disabled():
        print(f"\nbare code-server to the first recorded save: {elapsed:.1f} s ({vsix.name})")


def saved(events_json: str) -> bool:
    for line in events_json.splitlines():
        event = json.loads(line)
        if event["payload"].get("file_path") == "notes.txt":
            return True
    return False


def test_no_python_gets_a_message_naming_the_fix(
    code_server_root: Path, browser: Any, tmp_path: Path, artefacts: Path
) -> None:
    vsix = bundled_vsix()
    missing = tmp_path / "no-such-python3"
    workspace = tmp_path / "project"
    workspace.mkdir()
    git(workspace, "init", "-q")
    settings = {**editor_settings(), "mplp.interpreter": str(missing)}
    with open_host(
        code_server_root, browser, tmp_path, workspace, artefacts, settings, vsix=vsix
    ) as other:
        [error] = wait_until(lambda: other.bench.errors() or None, what="the error message")
        assert f"No Python found to run mplp-lsp: {missing} (from mplp.interpreter)" in error
        assert "Install Python 3.11 or newer" in error
        # The status bar item and the message are separate updates of the window.
        wait_until(lambda: "error" in other.bench.status_html(), what="the status bar's error")

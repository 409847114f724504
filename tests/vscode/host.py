"""A real VS Code for tests: code-server with the packaged extension, driven through Chromium.

`editors/vscode/test/host/setup.sh` puts code-server in a cache folder; this module installs the
`.vsix` into a fresh profile, starts code-server on a loopback port and opens a folder in
Debian's Chromium through Playwright (no browser download). Outside CI a missing piece skips
the tests that need it, with the reason; with CI=true it fails them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from tests import required
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "editors" / "vscode" / "test" / "host" / "setup.sh"
EXTENSION_DIR = REPO / "editors" / "vscode"
# `npm run package -- --target linux-x64` (CI) and `npm run package` (no bundled server).
BUNDLED_VSIX = EXTENSION_DIR / "mplp-lsp-linux-x64.vsix"
PLAIN_VSIX = EXTENSION_DIR / "mplp-lsp.vsix"
EXTENSION_ID = "mplp-lsp.mplp-lsp"
STATUS_ITEM = f'[id="{EXTENSION_ID}.mplp.status"]'
T = TypeVar("T")


def unavailable(reason: str) -> NoReturn:
    required.unavailable(f"real VS Code unavailable: {reason}")


def code_server_dir() -> Path:
    """Set up (or reuse) code-server; the folder holding its node_modules."""
    if not shutil.which("npm"):
        unavailable("npm is not installed")
    done = subprocess.run(
        ["bash", str(SETUP)], capture_output=True, text=True, timeout=1200, check=False
    )
    if done.returncode != 0:
        unavailable(f"{SETUP.name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def packaged_vsix() -> Path:
    """MPLP_LSP_VSIX, else the linux-x64 .vsix, else the one without a bundled server."""
    configured = os.environ.get("MPLP_LSP_VSIX")
    vsix = Path(configured) if configured else BUNDLED_VSIX
    if not configured and not vsix.is_file():
        vsix = PLAIN_VSIX
    if not vsix.is_file():
        unavailable(f"no {vsix.name}: run `npm run package` in editors/vscode")
    return vsix


def bundled_vsix() -> Path:
    """The linux-x64 .vsix with the server in it."""
    if not BUNDLED_VSIX.is_file():
        unavailable(f"no {BUNDLED_VSIX.name}: run `npm run package -- --target linux-x64`")
    return BUNDLED_VSIX


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class CodeServer:
    """One code-server with its own profile and the extension installed."""

    root: Path
    profile: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def settings_file(self) -> Path:
        return self.profile / "User" / "settings.json"

    def write_settings(self, settings: dict[str, Any]) -> None:
        self.settings_file.parent.mkdir(parents=True, exist_ok=True)
        self.settings_file.write_text(json.dumps(settings, indent=2))

    def url(self, folder: Path) -> str:
        return f"http://127.0.0.1:{self.port}/?folder={folder}"

    def extension_log(self) -> str:
        """The MPLP output channel (the extension's and the server's log lines)."""
        logs = sorted(self.profile.glob(f"logs/*/exthost*/{EXTENSION_ID}/MPLP.log"))
        return "\n".join(log.read_text(errors="replace") for log in logs)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def code_server(
    root: Path, profile: Path, vsix: Path, settings: dict[str, Any], env: dict[str, str]
) -> Iterator[CodeServer]:
    entry = root / "node_modules" / "code-server" / "out" / "node" / "entry.js"
    # By its full path: ``env`` may have a PATH without Node's folder.
    node = shutil.which("node") or "node"
    dirs = ["--user-data-dir", str(profile), "--extensions-dir", str(profile / "extensions")]
    subprocess.run(
        [node, str(entry), *dirs, "--install-extension", str(vsix)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    port = free_port()
    log = (profile / "code-server.log").open("wb")
    process = subprocess.Popen(
        [
            node,
            str(entry),
            *dirs,
            "--auth",
            "none",
            "--bind-addr",
            f"127.0.0.1:{port}",
            "--disable-telemetry",
            "--disable-update-check",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    server = CodeServer(root, profile, port, process)
    server.write_settings(settings)
    try:
        wait_until(lambda: _answers(port), timeout=120, what="code-server to answer")
        yield server
    finally:
        server.stop()
        log.close()


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
            return True
    except OSError:
        return False


def base_settings(interpreter: str = sys.executable) -> dict[str, Any]:
    """The test profile's settings: the test venv's mplp-lsp (not the .vsix's bundle), traced."""
    return {
        **editor_settings(),
        "mplp.interpreter": interpreter,
        "mplp.importStrategy": "fromEnvironment",
        "mplp.trace.server": "messages",
    }


def editor_settings() -> dict[str, Any]:
    """User settings of a test profile: no trust prompt, no welcome page, no distractions."""
    return {
        "security.workspace.trust.enabled": False,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.enableExperiments": False,
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "extensions.ignoreRecommendations": True,
        "update.mode": "none",
        "telemetry.telemetryLevel": "off",
        "files.autoSave": "off",
        "editor.acceptSuggestionOnEnter": "off",
        "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
        "editor.autoClosingBrackets": "never",
    }


def server_processes(state_dir: Path) -> list[int]:
    """Pids of `mplp_lsp serve` processes that record into ``state_dir`` (by their environment)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"serve" not in argv or not any(b"mplp" in arg for arg in argv):
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"MPLP_LSP_STATE_DIR={state_dir}".encode() in environ:
            found.append(int(proc.name))
    return found


def argv_of(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0")
    return [arg.decode() for arg in raw.split(b"\0")]

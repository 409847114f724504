"""The extension in a real VS Code (code-server), driven the way a user drives it.

One folder, one editor window, the tests in order: the server starts (exactly as the extension
means to start it), a save becomes one event and the status bar counts it, drift found at
start-up is in the Problems panel and each quick fix does what it says, every command runs
without an error, and an interpreter without mplp-lsp gets a message that names the fix.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.sources.recorded import SCRATCH_PREFIX
from tests.support.waiting import wait_until
from tests.vscode.conftest import Host, git, open_host
from tests.vscode.host import argv_of, base_settings, server_processes

pytestmark = pytest.mark.realhost

BASE = "".join(f"line {i}\n" for i in range(1, 11))
DISK = BASE.replace("line 10\n", "line 10 disk\n")
RECORDED = BASE.replace("line 1\n", "line 1 psg\n")
MERGED = DISK.replace("line 1\n", "line 1 psg\n")
# file: (what the PSG recorded, what is on disk when the editor opens the folder)
DRIFTED = {
    "drift/fs.txt": (RECORDED, DISK),
    "drift/psg.txt": (RECORDED, DISK),
    "drift/merge.txt": (RECORDED, DISK),
    "drift/later.txt": (RECORDED, DISK),
    "drift/clash.txt": (
        BASE.replace("line 5\n", "line 5 psg\n"),
        BASE.replace("line 5\n", "line 5 disk\n"),
    ),
}
PLANTED = "import pathlib; pathlib.Path({marker!r}).write_text('ran')\n"


def prepare(workspace: Path, state_dir: Path, marker: Path) -> None:
    """A git repository whose files drifted while nothing was recording, and a planted
    `mplp_lsp` package that would run if the server imported from the workspace."""
    workspace.mkdir()
    git(workspace, "init", "-q")
    (workspace / "notes.txt").write_text("notes\n")
    # The workspace's own settings file: VS Code sends only what the user set, so it applies.
    (workspace / ".mplp-lsp.toml").write_text('exclude = ["build/"]\n')
    (workspace / "build").mkdir()
    (workspace / "build" / "out.txt").write_text("generated\n")
    (workspace / "probe.txt").write_text("probe\n")
    (workspace / "drift").mkdir()
    for path in DRIFTED:
        (workspace / path).write_text(BASE)
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "base")
    env = {**os.environ, "MPLP_LSP_STATE_DIR": str(state_dir)}
    for path, (recorded, _disk) in DRIFTED.items():
        (workspace / path).write_text(recorded)
        store = [sys.executable, "-I", "-m", "mplp_lsp", "emit", "file", "--path", path]
        subprocess.run(
            [*store, "--change", "modified", "--workspace", str(workspace)],
            check=True,
            capture_output=True,
            env=env,
            cwd=state_dir.parent,
        )
    for path, (_recorded, disk) in DRIFTED.items():
        (workspace / path).write_text(disk)
    for name in ("__init__.py", "__main__.py"):
        (workspace / "mplp_lsp").mkdir(exist_ok=True)
        (workspace / "mplp_lsp" / name).write_text(PLANTED.format(marker=str(marker)))
    (workspace / "sitecustomize.py").write_text(PLANTED.format(marker=str(marker)))


@pytest.fixture(scope="module")
def host(
    code_server_root: Path,
    browser: Any,
    tmp_path_factory: pytest.TempPathFactory,
    artefacts: Path,
) -> Iterator[Host]:
    tmp = tmp_path_factory.mktemp("vscode")
    workspace = tmp / "project"
    prepare(workspace, tmp / "state", tmp / "planted-ran")
    with open_host(code_server_root, browser, tmp, workspace, artefacts) as opened:
        yield opened


def events(host: Host, kind: str | None = None) -> list[dict[str, Any]]:
    args = ["events", "--json", *(["--kind", kind] if kind else [])]
    return [json.loads(line) for line in host.cli(*args).stdout.splitlines() if line.strip()]


def drift_entries(host: Host) -> dict[str, dict[str, Any]]:
    report = json.loads(host.cli("drift", "--json", check=False).stdout)
    return {entry["path"]: entry for entry in report["drift"]}


def test_the_server_starts_isolated_outside_the_workspace(host: Host) -> None:
    planted_ran = host.workspace.parent / "planted-ran"
    wait_until(
        lambda: host.bench.events_today() is not None or planted_ran.exists(),
        what="the status bar to show the server's state (or the planted code to run)",
    )
    assert not planted_ran.exists(), "a file of the workspace ran as mplp_lsp"
    assert "error" not in host.bench.status_html()
    [pid] = wait_until(lambda: server_processes(host.state_dir) or None, what="the server process")
    # Exactly this argv: no option a client library added (`--stdio`), isolated mode (-I).
    assert argv_of(pid) == [sys.executable, "-I", "-m", "mplp_lsp", "serve"]
    cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    assert not cwd.is_relative_to(host.workspace), cwd
    # mplp.trace.server really traces into the MPLP channel.
    wait_until(
        lambda: "Sending request 'initialize" in host.server.extension_log(),
        what="LSP traces in the MPLP channel",
    )


def test_a_save_is_one_event_and_the_status_bar_counts_it(host: Host) -> None:
    host.bench.open_file("notes.txt")
    host.bench.type_at_end("typed in VS Code\n")
    host.bench.save()
    wait_until(
        lambda: "typed in VS Code" in (host.workspace / "notes.txt").read_text(),
        what="the save on disk",
    )

    wait_until(lambda: file_updates(host, "notes.txt"), what="the save's file_update")
    # The bar follows the store, including the graph_update that follows the save.
    stored = wait_until(
        lambda: (n := len(events(host))) == host.bench.events_today() and n,
        what="the status bar to count every stored event",
    )
    # Time for a late echo from the watcher to show up as a second event (it must not).
    host.bench.page.wait_for_timeout(1500)
    assert len(file_updates(host, "notes.txt")) == 1
    assert host.bench.events_today() == stored == len(events(host))


def test_drift_is_in_the_problems_panel_without_a_command(host: Host) -> None:
    for path in DRIFTED:
        name = path.rsplit("/", 1)[-1]

        def listed(name: str = name) -> bool:
            return name in host.bench.problems()

        wait_until(listed, what=f"{name} in the Problems panel")
    assert "Drift" in host.bench.problems()


QUICK_FIXES = {
    "fs": ("drift/fs.txt", "Drift: file system wins (update the project graph)"),
    "psg": ("drift/psg.txt", "Drift: PSG wins (restore the recorded content)"),
    "merge": ("drift/merge.txt", "Drift: three-way merge"),
    "later": ("drift/later.txt", "Drift: decide later"),
}


@pytest.mark.parametrize("fix", list(QUICK_FIXES))
def test_each_quick_fix_does_what_it_says(host: Host, fix: str) -> None:
    """A fix that rewrites the file goes through the editor: the buffer gets the result (the
    file has not changed yet), and the save writes it; buffer and file agree after each fix."""
    path, title = QUICK_FIXES[fix]
    recorded, disk = DRIFTED[path]
    updates = len(file_updates(host, path))
    host.bench.open_file(path)
    host.bench.quick_fix(title)
    expected = {"fs": disk, "psg": recorded, "merge": MERGED, "later": disk}[fix]
    if fix in ("psg", "merge"):
        wait_until(lambda: host.bench.text() == expected, what="the result in the editor")
        assert (host.workspace / path).read_text() == disk
        host.bench.save()
    wait_until(
        lambda: path not in drift_entries(host), what="the finding gone from `mplp-lsp drift`"
    )
    assert (host.workspace / path).read_text() == expected
    assert wait_until(lambda: not host.bench.dirty(), what="the editor saved")
    assert host.bench.text() == expected
    if fix == "later":
        assert wait_until(lambda: status(host)["drift_deferred"], what="the finding set aside") == 1
    host.bench.close_editors()
    host.bench.page.wait_for_timeout(2000)
    assert_no_temp_names(host)
    # Restoring the recorded content is no edit; the merge's result saved is one.
    assert len(file_updates(host, path)) == updates + (fix == "merge")


def file_updates(host: Host, path: str) -> list[dict[str, Any]]:
    return [e for e in events(host, "file_update") if e["payload"]["file_path"] == path]


def status(host: Host) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(host.cli("status", "--json").stdout)
    return report


def test_a_conflicted_merge_is_in_the_buffer_and_a_finding_until_saved(host: Host) -> None:
    path = "drift/clash.txt"
    disk = DRIFTED[path][1]
    host.bench.open_file(path)
    host.bench.quick_fix("Drift: three-way merge")
    wait_until(lambda: "<<<<<<<" in host.bench.text(), what="conflict markers in the editor")
    assert (host.workspace / path).read_text() == disk
    host.bench.command("MPLP: Scan for drift")
    entry = wait_until(lambda: drift_entries(host).get(path), timeout=15, what="the finding")
    assert entry["state"] == "open"
    assert "conflict(s) marked in the editor" in entry["message"]
    assert "clash.txt" in host.bench.problems()
    merged = host.bench.text()
    host.bench.save()
    wait_until(lambda: (host.workspace / path).read_text() == merged, what="the markers saved")
    assert wait_until(lambda: not host.bench.dirty(), what="the editor saved")
    host.bench.close_editors()
    assert_no_temp_names(host)


def assert_no_temp_names(host: Host) -> None:
    """No event names one of the daemon's own temporary files (a settings file named
    ``.mplp-lsp.toml`` is not one)."""
    for event in events(host):
        assert SCRATCH_PREFIX not in json.dumps(event["payload"]), event


COMMANDS = [
    "MPLP: Show status",
    "MPLP: Show logs",
    "MPLP: Scan for drift",
    "MPLP: Install Git hooks",
    "MPLP: Open event log",
    "MPLP: Restart the mplp-lsp server",
]


@pytest.mark.parametrize("title", COMMANDS)
def test_each_command_runs_without_an_error(host: Host, title: str) -> None:
    host.bench.clear_notifications()
    before = host.server.extension_log().count("Traceback")
    host.bench.command(title)
    if title == "MPLP: Show status":
        host.bench.page.locator(".tab", has_text="mplp-lsp status").first.wait_for()
    if title.startswith("MPLP: Restart"):
        wait_until(lambda: host.bench.events_today() is not None, what="the server back")
    if title in ("MPLP: Scan for drift", "MPLP: Install Git hooks"):
        wait_until(
            lambda: any(s != "error" and "MPLP" in m for s, m in host.bench.notifications()),
            what="the command's answer",
        )
    host.bench.page.wait_for_timeout(500)
    assert host.bench.errors() == []
    assert host.server.extension_log().count("Traceback") == before
    host.bench.close_editors()


def test_an_interpreter_without_mplp_lsp_gets_a_message_naming_the_fix(
    code_server_root: Path, browser: Any, tmp_path: Path, artefacts: Path
) -> None:
    # The same real interpreter with no site-packages at all: mplp_lsp cannot be imported.
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    python.chmod(0o755)
    workspace = tmp_path / "project"
    workspace.mkdir()
    git(workspace, "init", "-q")
    settings = {**base_settings(), "mplp.interpreter": str(python)}
    with open_host(code_server_root, browser, tmp_path, workspace, artefacts, settings) as other:
        error = wait_until(lambda: other.bench.errors() or None, what="the error message")
        assert f"mplp-lsp is not installed in {python}" in error[0]
        assert f"{python} -m pip install mplp-lsp" in error[0]
        # The status bar item and the message are separate updates of the window.
        wait_until(lambda: "error" in other.bench.status_html(), what="the status bar's error")


def test_an_untrusted_folder_cannot_start_a_program_through_its_settings(
    code_server_root: Path, browser: Any, tmp_path: Path, artefacts: Path
) -> None:
    """Restricted Mode: the folder's own `mplp.interpreter` is ignored, the user's is used."""
    marker = tmp_path / "planted-interpreter-ran"
    planted = tmp_path / "planted-python"
    planted.write_text(f'#!/bin/sh\ntouch {marker}\nexec {sys.executable} "$@"\n')
    planted.chmod(0o755)
    workspace = tmp_path / "project"
    (workspace / ".vscode").mkdir(parents=True)
    git(workspace, "init", "-q")
    (workspace / ".vscode" / "settings.json").write_text(
        json.dumps({"mplp.interpreter": str(planted), "mplp.remoteUrl": "http://127.0.0.1:9/"})
    )
    settings = {
        **base_settings(),
        "security.workspace.trust.enabled": True,
        "security.workspace.trust.startupPrompt": "never",
        "security.workspace.trust.emptyWindow": False,
    }
    with open_host(code_server_root, browser, tmp_path, workspace, artefacts, settings) as other:
        wait_until(lambda: other.bench.events_today() is not None, what="the server recording")
        assert not marker.exists(), "the folder's interpreter ran"
        assert "remote off" in other.bench.status_text()


def test_open_dashboard_has_vs_code_open_the_private_login_page(
    code_server_root: Path, browser: Any, tmp_path: Path, artefacts: Path
) -> None:
    """The server writes the login page into the state dir (0600) and has VS Code open it
    (window/showDocument, external): VS Code accepts, and what it is handed is that file,
    never a code (Neovim's suite checks the URI itself). code-server's browser cannot load a
    file of the machine the server runs on (there the dashboard is opened with `mplp-lsp
    ui`, docs/ui.md), so the page is opened in a browser on this machine: it logs that
    browser in. No code is ever written to the extension's log. A window of its own: once
    code-server has been asked to open a file outside the browser, its page takes no more
    keys in headless Chromium."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    git(workspace, "init", "-q")
    with open_host(code_server_root, browser, tmp_path, workspace, artefacts) as host:
        wait_until(lambda: host.bench.events_today() is not None, what="the server recording")
        host.bench.command("MPLP: Open dashboard")
        logged = wait_until(
            lambda: re.search(r"mplp\.openDashboard: (\{.*\})", host.server.extension_log()),
            what="the command's answer",
        )
        assert json.loads(logged.group(1))["shown"] is True
        written = next(host.state_dir.rglob("ui-login.html"))
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        url = json.loads(next(host.state_dir.rglob("api.json")).read_text())["url"]
        context = browser.new_context()
        try:
            tab = context.new_page()
            tab.goto(written.as_uri())
            tab.wait_for_url(f"{url}/ui/")
        finally:
            context.close()
        assert "code=" not in host.server.extension_log()


def test_the_workspace_settings_file_applies_under_vscode(host: Host) -> None:
    host.bench.open_file("build/out.txt")
    host.bench.type_at_end("edited in VS Code\n")
    host.bench.save()
    host.bench.open_file("probe.txt")
    host.bench.type_at_end("edited in VS Code\n")
    host.bench.save()
    wait_until(lambda: file_updates(host, "probe.txt"), what="the probe's file_update")
    host.bench.page.wait_for_timeout(1500)  # the excluded save would be stored by now
    assert file_updates(host, "build/out.txt") == []
    report = json.loads(host.cli("config", "--json").stdout)["settings"]
    assert report["exclude"] == {
        "value": ["build/"],
        "origin": f"workspace file {host.workspace / '.mplp-lsp.toml'}",
    }

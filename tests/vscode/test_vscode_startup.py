"""What a user does in VS Code while the server starts reaches the server once it runs.

vscode-languageclient listens for saves only once the server has answered ``initialize``, and a
server's start can take seconds (the first start of a bundled server compiles its modules). Here
the interpreter is a wrapper that waits for the test's word before it runs the real one, so the
save certainly falls while the server is starting, whatever the machine's speed.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until
from tests.vscode.conftest import git, open_host
from tests.vscode.host import base_settings

pytestmark = pytest.mark.realhost


def held_interpreter(folder: Path) -> tuple[Path, Path]:
    """An interpreter that starts only once the returned file exists (the test's word)."""
    go = folder / "go"
    wrapper = folder / "held-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.1; done\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, go


def test_a_save_made_while_the_server_starts_is_recorded(
    code_server_root: Path, browser: Any, tmp_path: Path, artefacts: Path
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    git(workspace, "init", "-q")
    (workspace / "notes.txt").write_text("notes\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "notes")
    interpreter, go = held_interpreter(tmp_path)
    settings = base_settings(interpreter=str(interpreter))

    with open_host(code_server_root, browser, tmp_path, workspace, artefacts, settings) as host:
        wait_until(lambda: host.bench.status_html() or None, what="the extension's status bar item")
        host.bench.open_file("notes.txt")
        host.bench.type_at_end("saved while the server starts\n")
        host.bench.save()
        wait_until(
            lambda: "saved while" in (workspace / "notes.txt").read_text() or None,
            what="the save on disk",
        )
        # Nothing has run the server yet: no store, no process that could have heard the save.
        assert not (host.state_dir / "events.db").exists()
        go.touch()

        def recorded() -> list[dict[str, Any]] | None:
            lines = host.cli("events", "--json", "--kind", "file_update").stdout.splitlines()
            found = [json.loads(line)["payload"] for line in lines if line.strip()]
            return [p for p in found if p["file_path"] == "notes.txt"] or None

        [payload] = wait_until(recorded, what="the save's file_update")
        assert payload["change_type"] == "modified"

"""The README's development section, run as a new contributor runs it: its two commands as
printed, in a copy of this checkout, against a project that has files and history already.

It checks what the section promises: the install works, ``watch`` says where it stores and
where its HTTP API listens, records the files already there as one baseline line (no file
event), prints a new file's events, stops on Ctrl-C without a traceback, and ``events`` in
the project shows them again.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from tests.conftest import REPO


def development_commands() -> list[str]:
    """The lines of the first ``sh`` block of the README's Development section."""
    section = (REPO / "README.md").read_text().split("\n## Development\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the Development section has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def copy_of_checkout(target: Path) -> Path:
    """The tracked files as they are now (a fresh clone of this working tree)."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def existing_project(root: Path) -> list[str]:
    root.mkdir()
    files = {"README.md": "# my project\n", "src/app.py": "print('hi')\n", "src/util.py": "X = 1\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    (root / "src/util.py").write_text("X = 2\n")
    subprocess.run(["git", "commit", "-qam", "second"], cwd=root, check=True, capture_output=True)
    return sorted(files)


class Printed:
    """A process's merged output, read as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if found := re.search(pattern, line):
                    return found
            if self.process.poll() is not None and not self.lines:
                break
            time.sleep(0.1)
        raise AssertionError(f"no line matching {pattern!r} in {self.lines}")


def test_the_development_section_works_as_written(tmp_path: Path) -> None:
    install, watch = development_commands()
    assert watch.split("#")[0].split()[-1] == "../my-project", watch
    clone = copy_of_checkout(tmp_path / "mplp-lsp")
    files = existing_project(tmp_path / "my-project")

    done = subprocess.run(
        ["bash", "-c", install], cwd=clone, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]

    process = subprocess.Popen(
        ["bash", "-c", f"exec {watch}"],
        cwd=clone,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    printed = Printed(process)
    try:
        printed.wait_for(r"^watching .*my-project \(store: .*\); Ctrl-C to stop$")
        printed.wait_for(r"^HTTP API on http://127\.0\.0\.1:\d+ \(token: .*\)$")
        baseline = printed.wait_for(r"^graph_update +bulk +(\d+) file nodes \(baseline\)$")
        assert int(baseline.group(1)) == len(files)
        (tmp_path / "my-project" / "src" / "new.py").write_text("print('new')\n")
        printed.wait_for(r"^file_update +created +src/new\.py$")
        printed.wait_for(r"^graph_update +node_add +file src/new\.py$")
        # Nothing happened to the files that were there: no file event names them.
        assert not [
            line
            for line in printed.lines
            if line.startswith("file_update") and "new.py" not in line
        ]
    finally:
        process.send_signal(signal.SIGINT)
        status = process.wait(timeout=60)
    assert status == 0, printed.lines
    assert not [line for line in printed.lines if "Traceback" in line]

    shown = subprocess.run(
        [str(clone / ".venv/bin/mplp-lsp"), "events"],
        cwd=tmp_path / "my-project",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert re.search(r"file_update +created +src/new\.py", shown), shown

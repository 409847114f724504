"""Input that used to reach places it must not: ``.git/`` and the state dir as event paths,
a store readable by others, bodies that made the API answer 500, a full disk.

Everything runs against the real CLI: ``mplp-lsp emit``, ``validate``, a ``watch`` daemon's
loopback API and a ``collector serve`` on 127.0.0.1; the full disk is a real tmpfs.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import Repo
from tests.support.collector import TOKEN, Collector
from tests.support.disk import fill, tmpfs
from tests.support.secrets import read_db

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).with_name("mplp-lsp"))
HOSTILE_BODIES = {
    "200k brackets": b"[" * 200_000 + b"]" * 200_000,
    "200k brackets and 20 digits": b"[" * 200_000 + b"1" * 20 + b"]" * 200_000,
    "100k-digit integer": b'{"file_path": "a.txt", "n": ' + b"9" * 100_000 + b"}",
    "invalid UTF-8": b'{"file_path": "\xff\xfe.txt", "change_type": "created"}',
    "number beyond a double": b'{"file_path": "a.txt", "n": 1e400}',
}
EXPECTED_CODES = {"invalid_json", "nesting_too_deep"}


def file_event(path: str, summary: str = "") -> dict[str, Any]:
    event = {"file_path": path, "change_type": "modified", "timestamp": "2026-03-02T08:00:00Z"}
    if summary:
        event["change_summary"] = summary
    return event


class Daemon:
    """A real ``mplp-lsp watch`` with its loopback API."""

    def __init__(
        self, workspace: Path, state: Path, log_file: Path, remote: str | None = None
    ) -> None:
        self.state = state
        env = {**os.environ, "MPLP_LSP_REMOTE_TOKEN": TOKEN}
        env.pop("MPLP_LSP_STATE_DIR", None)
        self.process = subprocess.Popen(
            [CLI, "watch", str(workspace), "--state-dir", str(state), "--log-file", str(log_file),
             "--log-level", "info", *(["--remote", remote] if remote else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        assert self.process.stderr is not None
        assert b"watching" in self.process.stderr.readline()
        deadline = time.monotonic() + 30
        while not (state / "api.json").exists():
            assert time.monotonic() < deadline, "the API did not start"
            time.sleep(0.05)
        endpoint = json.loads((state / "api.json").read_text())
        self.url = endpoint["url"]
        self.token = (state / "api-token").read_text().strip()

    def post(self, path: str, body: bytes) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + path,
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return int(reply.status), json.loads(reply.read())
        except urllib.error.HTTPError as error:
            return int(error.code), json.loads(error.read() or b"null")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(60)


@contextmanager
def daemon(
    workspace: Path, state: Path, log_file: Path, remote: str | None = None
) -> Iterator[Daemon]:
    running = Daemon(workspace, state, log_file, remote)
    try:
        yield running
    finally:
        running.stop()


def codes(answer: Any) -> set[str]:
    return {issue["code"] for issue in answer["errors"]}


def emit_file(workspace: Path, state: Path, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "emit", "file", "--workspace", str(workspace), "--state-dir", str(state),
         "--path", path, "--change", "modified"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


RESERVED = [".git/config", ".git/hooks/post-commit", "sub/.git/HEAD", "state/events.db"]


def test_git_internals_and_the_state_dir_are_never_event_paths(tmp_path: Path) -> None:
    repo = Repo.create(tmp_path / "ws")
    repo.commit("initial")
    workspace, state = repo.path, repo.path / "state"  # a state dir inside the workspace
    (workspace / "sub" / ".git").mkdir(parents=True)
    (workspace / "sub" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for path in RESERVED:
        done = emit_file(workspace, state, path)
        assert done.returncode == 1, (path, done.stdout, done.stderr)
        assert "path_reserved" in done.stdout + done.stderr, path
        assert "Traceback" not in done.stderr
    with daemon(workspace, state, tmp_path / "watch.log") as running:
        for path in RESERVED:
            status, answer = running.post(
                "/integration/file", json.dumps(file_event(path)).encode()
            )
            assert (status, codes(answer)) == (422, {"path_reserved"}), path
        status, _ = running.post("/integration/file", json.dumps(file_event("ok.txt")).encode())
        assert status == 202
        (workspace / ".git" / "config").write_text("[core]\n\tbare = false\n# touched\n")
        (workspace / "seen.txt").write_text("the watcher's own events still flow\n")
        deadline = time.monotonic() + 30
        while b"seen.txt" not in read_db(state / "events.db", tables=("events",)):
            assert time.monotonic() < deadline
            time.sleep(0.1)
    stored = read_db(state / "events.db")
    for needle in (b".git/config", b".git/hooks", b".git/HEAD", b"events.db"):
        assert needle not in stored, needle


def test_the_store_is_private_whatever_the_folder_mode_and_umask(tmp_path: Path) -> None:
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    (workspace / "a.txt").write_text("a\n")
    old = os.umask(0o002)
    try:
        assert emit_file(workspace, state, "a.txt").returncode == 0
        with daemon(workspace, state, tmp_path / "watch.log"):
            # while the daemon owns the store, emit leaves a spool file in the inbox
            assert emit_file(workspace, state, "a.txt").returncode == 0
            files = [state / "events.db", state / "events.db-wal", state / "events.db-shm"]
            files += list((state / "inbox").glob("*"))
            modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files if p.exists()}
    finally:
        os.umask(old)
    assert {"events.db", "events.db-wal", "events.db-shm"} <= modes.keys()
    assert set(modes.values()) == {"0o600"}, modes


def test_hostile_bodies_get_a_validation_result_from_the_api(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    log_file = tmp_path / "watch.log"
    with daemon(workspace, tmp_path / "state", log_file) as running:
        for name, body in HOSTILE_BODIES.items():
            status, answer = running.post("/integration/file", body)
            assert status == 422 and codes(answer) <= EXPECTED_CODES, (name, status, answer)
            status, answer = running.post("/psg/contexts", body)
            assert status == 422 and codes(answer) <= EXPECTED_CODES, (name, status, answer)
        status, _ = running.post("/integration/file", json.dumps(file_event("a.txt")).encode())
        assert status == 202  # still serving
    assert "Traceback" not in log_file.read_text()


def test_hostile_bodies_get_an_error_answer_from_the_collector(tmp_path: Path) -> None:
    collector = Collector(tmp_path / "collector.db")
    try:
        for name, body in HOSTILE_BODIES.items():
            request = urllib.request.Request(
                collector.url + "/events",
                data=body,
                method="POST",
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            answer = json.loads(refused.value.read())
            assert refused.value.code == 400, (name, answer)
            assert answer["error"] in EXPECTED_CODES, (name, answer)
    finally:
        collector.stop()


def test_validate_reports_hostile_input_as_invalid(tmp_path: Path) -> None:
    for name, body in HOSTILE_BODIES.items():
        path = tmp_path / "input.json"
        path.write_bytes(body)
        done = subprocess.run(
            [CLI, "validate", "--json", str(path)], capture_output=True, timeout=60, check=False
        )
        assert done.returncode == 1, (name, done.stderr)
        assert b"Traceback" not in done.stderr, name
        result = json.loads(done.stdout)
        assert not result["ok"] and {e["code"] for e in result["errors"]} <= EXPECTED_CODES


def full_lines(log_file: Path) -> list[str]:
    return [line for line in log_file.read_text().splitlines() if ": the disk " in line]


def test_a_full_disk_is_507_with_one_log_line_per_episode(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    log_file = tmp_path / "watch.log"
    with (
        tmpfs(tmp_path / "small", "8m") as small,
        daemon(workspace, small / "state", log_file) as running,
    ):
        big = "x" * 400_000  # each event needs new pages: the WAL cannot absorb it
        assert running.post("/integration/file", json.dumps(file_event("a.txt")).encode())[0] == 202
        filler = fill(small)
        answers = [
            running.post("/integration/file", json.dumps(file_event(f"f{n}.txt", big)).encode())
            for n in range(5)
        ]
        assert [(s, codes(a)) for s, a in answers] == [(507, {"storage_full"})] * 5
        assert len(full_lines(log_file)) == 1, full_lines(log_file)
        filler.unlink()
        status, _ = running.post("/integration/file", json.dumps(file_event("b.txt", big)).encode())
        assert status == 202  # nothing lost: the daemon stores again
    lines = full_lines(log_file)
    assert len(lines) == 2 and "space again" in lines[1], lines
    assert "Traceback" not in log_file.read_text()


def test_the_collector_on_a_full_disk_answers_507_and_loses_nothing(tmp_path: Path) -> None:
    """A daemon forwards to a collector whose disk is full: 507s, retried until there is
    space again, then every event arrives; the collector logs the episode in two lines."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with tmpfs(tmp_path / "small", "8m") as small:
        collector = Collector(small / "collector.db")
        try:
            filler = fill(small)
            with daemon(
                workspace, tmp_path / "state", tmp_path / "watch.log", remote=collector.url
            ) as running:
                big = "y" * 300_000
                for n in range(3):
                    body = json.dumps(file_event(f"f{n}.txt", big)).encode()
                    assert running.post("/integration/file", body)[0] == 202
                time.sleep(3.0)  # the forwarder tries, and is refused
                assert collector.events() == []
                filler.unlink()
                deadline = time.monotonic() + 90
                while len(collector.events()) < 3:
                    assert time.monotonic() < deadline, "the forwarder gave up"
                    time.sleep(0.2)
        finally:
            collector.stop()
            assert collector.process.stderr is not None
            logged = collector.process.stderr.read()
    lines = [line for line in logged.splitlines() if ": the disk " in line]
    assert len(lines) == 2 and "disk is full" in lines[0] and "space again" in lines[1], lines
    assert "Traceback" not in logged

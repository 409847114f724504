"""``mplp-lsp collector serve`` refuses what it cannot run with in one line, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def serve(
    tmp_path: Path, *args: str, token: str | None = "a-token"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MPLP_LSP_COLLECTOR_TOKEN"}
    if token is not None:
        env["MPLP_LSP_COLLECTOR_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", "collector", "serve", "--log-level", "error", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 1
    assert done.stderr.startswith("mplp-lsp collector: "), done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_database_folder_is_named(tmp_path: Path) -> None:
    done = serve(tmp_path, "--port", "0", "--db", str(tmp_path / "absent" / "c.db"))
    refused(done, f"the folder of --db does not exist: {tmp_path / 'absent'}")


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("\n")
    done = serve(tmp_path, "--port", "0", "--token-file", "token", token=None)
    refused(done, "the token is empty")
    assert not (tmp_path / "collector.db").exists()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o606])
def test_a_token_file_of_the_database_that_others_may_read_is_refused(
    tmp_path: Path, mode: int
) -> None:
    token = tmp_path / "collector.db.token"
    token.write_text("known-to-others\n")
    token.chmod(mode)
    done = serve(tmp_path, "--port", "0", token=None)
    refused(done, f"{token} is not a private file of yours")
    assert "--token-file" in done.stderr  # and what to do instead


def test_a_taken_port_is_refused(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = serve(tmp_path, "--port", port)
    refused(done, f"cannot listen on 127.0.0.1:{port}")


@pytest.mark.parametrize(
    "content", [b"not a database at all" * 10, b"SQLite format 3\0" + b"\xff" * 100]
)
def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "collector.db").write_bytes(content)
    done = serve(tmp_path, "--port", "0")
    refused(done, f"cannot use the database {tmp_path / 'collector.db'}")
    assert (tmp_path / "collector.db").read_bytes() == content  # left as it was

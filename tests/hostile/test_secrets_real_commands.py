"""Secrets that real commands carry stay out of the store, the outbox, the collector, the logs
and every process's argv.

A real ``mplp-lsp watch`` (debug log to a file, forwarding to a real collector on
127.0.0.1) records: ``mplp-lsp run`` of real curl, gpg and npm command lines with
credentials in their arguments and headers; a file whose name holds a token after an
underscore; a branch named ``fix/password=...`` made with git commands chained by ``&&``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_forwarding import TOKEN, Collector, free_port
from tests.gitrepo import BASE_ENV, Repo
from tests.hostile.test_secrets import EVENT_TABLES, read_all, read_db
from tests.required import unavailable

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).with_name("mplp-lsp"))
# Random, never real; each unique so a hit names its form.
SECRETS = {
    "curl -u": "Kx7pass-curl-u",
    "curl --user": "Kx7pass-curl-user",
    "Authorization: token": "Kx7tok-authz-9f2",
    "Cookie: session": "Kx7cookie-sess-4d1",
    "--passphrase=": "Kx7phrase-gpg-77a",
    "npm _authToken": "Kx7npm-auth-b31c",
    "branch password=": "Kx7branchpw",
    "file name token": "ghp_Kx7Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uvw",
}


def leaks(blob: bytes) -> list[str]:
    return sorted(form for form, secret in SECRETS.items() if secret.encode() in blob)


def need(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        unavailable(f"{program} is not installed")
    return found


def run_recorded(workspace: Path, state: Path, *command: str) -> None:
    subprocess.run(
        [CLI, "run", "--workspace", str(workspace), "--state-dir", str(state), "--", *command],
        cwd=workspace,
        capture_output=True,
        timeout=120,
        check=False,
    )


def wait_for(predicate: object, timeout: float = 60.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def debug_watch(
    workspace: Path, state: Path, remote: str, log_file: Path, token: str, **env: str
) -> subprocess.Popen[bytes]:
    """A real ``mplp-lsp watch`` forwarding to ``remote``, its debug log in ``log_file``;
    returns once it watches. ``env`` adds to the environment (a PATH, say)."""
    environment = {**os.environ, "MPLP_LSP_REMOTE_TOKEN": token, **env}
    environment.pop("MPLP_LSP_STATE_DIR", None)
    watch = subprocess.Popen(
        [CLI, "watch", str(workspace), "--state-dir", str(state), "--remote", remote,
         "--log-level", "debug", "--log-file", str(log_file)],
        env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert watch.stderr is not None
    assert b"watching" in watch.stderr.readline()
    return watch


def all_argv() -> bytes:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                out.append(Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                continue  # gone meanwhile
    return b"\n".join(out)


def test_real_commands_secrets_reach_no_store_log_collector_or_argv(tmp_path: Path) -> None:
    curl, gpg, npm = need("curl"), need("gpg"), need("npm")
    collector = Collector(tmp_path / "collector.db")
    repo = Repo.create(tmp_path / "ws")
    repo.commit("initial")
    workspace, state, log_file = repo.path, tmp_path / "state", tmp_path / "watch.log"
    watch = debug_watch(workspace, state, collector.url, log_file, TOKEN)
    try:
        closed = f"http://127.0.0.1:{free_port()}/"
        s = SECRETS
        run_recorded(
            workspace, state, curl, "-s", "--max-time", "5",
            "-u", f"deploy:{s['curl -u']}", "--user", f"ops:{s['curl --user']}",
            "-H", f"Authorization: token {s['Authorization: token']}",
            "-H", f"Cookie: session={s['Cookie: session']}", closed,
        )  # fmt: skip
        run_recorded(
            workspace, state, gpg, "--batch", f"--passphrase={s['--passphrase=']}", "--version"
        )
        npmrc = tmp_path / "npmrc"
        run_recorded(
            workspace, state, npm, "config", "set", "--userconfig", str(npmrc),
            "//registry.example.org/:_authToken", s["npm _authToken"],
        )  # fmt: skip
        (workspace / f"conf_{s['file name token']}.env").write_text("x=1\n")
        (workspace / "visible.txt").write_text("after the secret file\n")
        git_env = {"PATH": os.environ["PATH"], **BASE_ENV, "HOME": str(tmp_path)}
        subprocess.run(
            ["sh", "-c", f"git checkout -q -b 'fix/password={s['branch password=']}' && "
             "git commit -q --allow-empty -m 'on the branch' && git checkout -q main"],
            cwd=workspace, env=git_env, check=True, timeout=60,
        )  # fmt: skip

        def forwarded() -> bool:
            events = collector.events()
            types = [str(e["envelope"].get("event_type")) for e in events]
            files = [e for e in events if "visible.txt" in str(e)]
            return (
                sum("tool" in t for t in types) >= 6
                and bool(files)
                and (any("fix/password=" in str(e) for e in events))
            )

        wait_for(forwarded)
        argv = all_argv()
    finally:
        watch.send_signal(signal.SIGINT)
        watch.wait(60)
        collector.stop()

    stored = read_db(state / "events.db", tables=(*EVENT_TABLES, "git_refs"))
    assert b"fix/password=" in stored and b"visible.txt" in stored, "nothing recorded"
    report = {
        "stored events, outbox, git_refs": leaks(stored),
        "integration error log": leaks(read_all(state, "integration-errors.jsonl*")),
        "watch debug log": leaks(log_file.read_bytes()),
        "collector": leaks(read_db(tmp_path / "collector.db")),
        "argv": leaks(argv),
    }
    assert report == {name: [] for name in report}
    assert log_file.stat().st_size > 0

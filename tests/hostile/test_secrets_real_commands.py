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
from pathlib import Path

import pytest

from tests.gitrepo import BASE_ENV, Repo
from tests.required import unavailable
from tests.support.collector import TOKEN, Collector, free_port
from tests.support.secrets import CLI, EVENT_TABLES, debug_watch, read_all, read_db
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

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

        wait_until(forwarded)
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

"""Secrets: canaries planted everywhere a real daemon looks must come out nowhere.

One real ``mplp-lsp serve`` (stdio, with its log in a file and forwarding to a real
``mplp-lsp collector serve``) watches a workspace where canary tokens of many kinds sit in
file content, file names, a branch name, commit messages, tool output and arguments, CI
variables and the daemon's own environment. Afterwards no canary may appear in a stored
event, the outbox, the integration error log, the daemon's log, any process's argv, or what
the collector received. File bytes may live only in the local content snapshot (the drift
restore needs them), which is never forwarded or logged: that table is the one exclusion.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client

from tests.e2e.harness import FAST_SETTINGS, plain
from tests.gitrepo import Repo
from tests.support.collector import TOKEN, Collector
from tests.support.secrets import EVENT_TABLES, read_all, read_db

pytestmark = pytest.mark.e2e

# Random, never real. Each kind the redactor knows, plus an environment-only secret.
CANARIES = {
    "aws_key_id": "AKIAQ7XKZ3MV9PLR2WTB",
    "aws_secret": "wJ7rXq2Lk9Pz4Tn8Vb3Mc6Hd1Gf5Sa0EyUiOpQwR",
    "github": "ghp_Q9x2L7k4P1z8T3n6V5b0M2c7H4d9G1f6S3aW",
    "slack": "xoxb-48213957201-6619302845573-Hq7Lm2Xk9Pz4Tn8Vb3Mc6Hd1",
    "stripe": "sk_live_51Hq7Lm2Xk9Pz4Tn8Vb3Mc6Hd",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnktOTkxIn0.Qm9w7XkZ2Lp4Tn8Vb3Mc6Hd1Gf5Sa0EyUiOpQwR",
    "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw\n-----END PRIVATE KEY-----",
    "generic": "Zr8Kq2Wm5Tx9Lp3Vn7Bc4Hd",
}
# Canaries used only as file names: a known gap (docs/threat-model.md), checked separately.
PATH_CANARIES = {
    "path_github": "ghp_P7x2L7k4P1z8T3n6V5b0M2c7H4d9G1f6S3aZ",
    "path_aws": "AKIAP7XKZ3MV9PLR2WTZ",
}
ENV_ONLY = "envonly-Hq7Lm2Xk9Pz4Tn8Vb3Mc6"


def needles() -> dict[str, bytes]:
    found = {name: value.encode() for name, value in CANARIES.items()}
    found["env_only"] = ENV_ONLY.encode()
    found["remote_token"] = TOKEN.encode()
    found.update((name, value.encode()) for name, value in PATH_CANARIES.items())
    return found


def leaks(blob: bytes) -> list[str]:
    return sorted(name for name, needle in needles().items() if needle in blob)


def plant_workspace(root: Path) -> Repo:
    repo = Repo.create(root)
    repo.commit("initial")
    return repo


def api_call(state: Path, method: str, path: str, body: Any) -> int:
    endpoint = json.loads((state / "api.json").read_text())
    token = (state / "api-token").read_text().strip()
    request = urllib.request.Request(
        endpoint["url"] + path,
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


async def test_no_canary_leaves_the_machine_or_reaches_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collector = Collector(tmp_path / "collector.db")
    workspace = tmp_path / "ws"
    repo = plant_workspace(workspace)
    state = tmp_path / "state"
    log_file = tmp_path / "daemon.log"
    # The daemon's environment: the remote token, CI variables and stray credentials.
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARIES["aws_secret"])
    monkeypatch.setenv("GITHUB_TOKEN", CANARIES["github"])
    monkeypatch.setenv("MY_SERVICE_PASSWORD", ENV_ONLY)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2] / "server"))
    client = make_test_lsp_client()
    await client.start_io(
        sys.executable,
        "-m",
        "mplp_lsp",
        "serve",
        "--state-dir",
        str(state),
        "--log-level",
        "debug",
        "--log-file",
        str(log_file),
    )
    settings = {
        **FAST_SETTINGS,
        "remoteUrl": collector.url,
        "forwardRetryInitialMs": 5,
        "forwardLingerMs": 2,
        "gitPollMs": 100,
    }
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            process_id=os.getpid(),
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
            initialization_options={"mplp": settings},
        )
    )
    try:
        deadline = time.monotonic() + 30
        while not plain(await client.protocol.send_request_async("mplp/status", None)).get("ready"):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        server = client._server  # pygls keeps the process it started under a private name
        assert server is not None
        daemon_pid = server.pid

        # File content and file names.
        content = "\n".join(f"{k} = '{v}'" for k, v in CANARIES.items()) + "\n"
        names = [f"conf/{PATH_CANARIES['path_github']}.env", f"conf/{PATH_CANARIES['path_aws']}"]
        for relative in ["src/settings.py", *names]:
            path = workspace / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            client.text_document_did_save(
                types.DidSaveTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=path.as_uri())
                )
            )
        # A branch and commit messages.
        repo.git("checkout", "-q", "-b", f"feature/{CANARIES['slack']}")
        repo.commit(f"rotate aws_secret_access_key={CANARIES['aws_secret']} {CANARIES['github']}")
        repo.commit(f"Authorization: Bearer {CANARIES['jwt']}")
        # Tool output and arguments, CI variables: through the loopback API.
        tool = {
            "tool_id": "deploy",
            "tool_kind": "other",
            "invocation_id": "3f1c2a4e-8b7d-4c2e-9a1f-0d5e6b7c8a90",
            "status": "failed",
            "started_at": "2026-03-02T08:00:00.000Z",
            "completed_at": "2026-03-02T08:00:01.000Z",
            "exit_code": 1,
            "output_summary": f"login failed for key {CANARIES['stripe']}",
            "args": ["--token", CANARIES["generic"], f"--password={ENV_ONLY}"],
            "working_directory": ".",
        }
        ci = {
            "ci_provider": "github-actions",
            "pipeline_id": "build",
            "run_id": "4711",
            "status": "running",
            "started_at": "2026-03-02T08:03:00Z",
            "branch_name": f"feature/{CANARIES['slack']}",
            "run_url": f"https://x:{CANARIES['github']}@ci.example.org/run/4711",
        }
        assert api_call(state, "POST", "/integration/tool", tool) in (200, 201, 202)
        assert api_call(state, "POST", "/integration/ci", ci) in (200, 201, 202, 422)
        # Rejected input carrying secrets reaches the integration error log.
        bad = {**tool, "exit_code": "not a number", "output_summary": CANARIES["slack"]}
        assert api_call(state, "POST", "/integration/tool", bad) == 422

        # Let everything settle and forward.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            kinds = {e["envelope"].get("event_type") for e in collector.events()}
            git_done = any("git" in str(k) for k in kinds)
            if git_done and len(collector.events()) >= 8:
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)

        argv = Path(f"/proc/{daemon_pid}/cmdline").read_bytes()
        argv += b"".join(
            Path(f"/proc/{pid}/cmdline").read_bytes()
            for pid in os.listdir("/proc")
            if pid.isdigit() and Path(f"/proc/{pid}/cmdline").exists() and int(pid) != os.getpid()
        )
    finally:
        await client.shutdown_session()
        await client.stop()
        collector.stop()

    received = read_db(tmp_path / "collector.db")
    assert b"src/settings.py" in received, "nothing was forwarded: the test would prove nothing"
    stored = read_db(state / "events.db", tables=EVENT_TABLES)
    assert b"src/settings.py" in stored
    report = {
        "stored events and outbox": leaks(stored),
        "integration error log": leaks(read_all(state, "integration-errors.jsonl*")),
        "daemon log": leaks(log_file.read_bytes()),
        "argv": leaks(argv),
        "collector": leaks(received),
    }
    # A path holding a credential is refused (path_secret), never stored or forwarded.
    assert report == {name: [] for name in report}

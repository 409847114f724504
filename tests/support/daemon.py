"""A real `mplp-lsp watch` daemon and the CLI beside it: started, asked for its API, stopped."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.e2e.harness import watch_argv
from tests.support.ci_env import CASES
from tests.support.collector import TOKEN


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``mplp-lsp <args>`` as a user runs it: its exit status and output, never raising."""
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def wait_for_api(state_dir: Path, workspace: Path, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = await asyncio.to_thread(
            cli, "status", "--json", "--state-dir", str(state_dir), "--workspace", str(workspace)
        )
        report = json.loads(done.stdout)
        if report.get("api"):
            return dict(report["api"])
        await asyncio.sleep(0.2)
    raise AssertionError("the daemon never reported its API")


async def start_watch(workspace: Path, state_dir: Path, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *watch_argv(workspace, state_dir, *extra),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def stop(daemon: asyncio.subprocess.Process) -> bytes:
    daemon.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(daemon.communicate(), 30)
    return err


SERVER = Path(__file__).resolve().parents[2] / "server"


CI_VARIABLES = {name for env, _ in CASES.values() for name in env}


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER), base.get("PYTHONPATH")]))
    base["MPLP_LSP_REMOTE_TOKEN"] = TOKEN
    return {**base, **extra}


def mplp(workspace: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", *args],
        cwd=workspace,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

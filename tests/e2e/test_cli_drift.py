"""``mplp-lsp drift`` as a real subprocess against a real workspace and store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mplp_lsp.config.settings import parse_settings
from mplp_lsp.engine.statedir import StateDirLock, StatePaths
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.sources.debounce import Change

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'server'}{os.pathsep}{REPO}"}
    env.pop("MPLP_LSP_STATE_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", "drift", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture
async def recorded(tmp_path: Path) -> tuple[Path, Path]:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    state = tmp_path / "state"
    settings, _ = parse_settings({"debounceMs": 0, "maxWaitMs": 0, "driftInterval": 0})
    workspace = await Workspace.open(root, settings, state_dir=state)
    for name in ("a.txt", "b.txt"):
        (root / name).write_text(f"{name}\n")
        workspace.observe(Change.CREATED, name)
    await workspace.settle()
    await workspace.bus.drain()
    await workspace.close()
    return root, state


async def test_clean_then_drift_then_resolved(recorded: tuple[Path, Path]) -> None:
    root, state = recorded
    done = cli("--state-dir", str(state), cwd=root)
    assert done.returncode == 0, done.stderr
    assert "no drift (2 files checked)" in done.stdout
    (root / "a.txt").write_text("changed\n")
    done = cli("--json", "--state-dir", str(state), cwd=root)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [(d["path"], d["reason"]) for d in report["drift"]] == [("a.txt", "modified")]
    # a path filter that leaves the drifted file out
    assert cli("--state-dir", str(state), "b.txt", cwd=root).returncode == 0
    done = cli("--resolve", "psg", "--json", "--state-dir", str(state), "a.txt", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["resolved"][0]["ok"]
    assert (root / "a.txt").read_text() == "a.txt\n"


async def test_with_a_daemon_running_it_reads_and_refuses_to_resolve(
    recorded: tuple[Path, Path],
) -> None:
    root, state = recorded
    (root / "a.txt").write_text("changed\n")
    assert cli("--state-dir", str(state), cwd=root).returncode == 1  # records the finding
    lock = StateDirLock(StatePaths(state).lock, workspace=root)
    assert lock.acquire()
    try:
        done = cli("--state-dir", str(state), cwd=root)
        assert done.returncode == 1
        assert f"pid {os.getpid()}" in done.stdout and "read-only" in done.stdout
        assert "a.txt" in done.stdout
        done = cli("--resolve", "fs", "--state-dir", str(state), cwd=root)
        assert done.returncode == 2
        assert f"pid {os.getpid()}" in done.stderr
    finally:
        lock.release()

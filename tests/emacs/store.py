"""What the tests read from the store, and how they give the PSG a record of a file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.e2e.harness import read_events, server_env


def file_events(state: Path) -> list[tuple[str, str]]:
    """(path, change) of every stored file_update, in the order they were stored."""
    return [
        (e["payload"]["file_path"], e["payload"]["change_type"])
        for e in read_events(state, "file_update")
    ]


def file_events_reach(state: Path, count: int) -> Callable[[], bool]:
    """A probe for Emacs.wait: the store holds at least ``count`` file events."""
    return lambda: len(file_events(state)) >= count


def payloads(state: Path) -> list[dict[str, Any]]:
    return [e["payload"] for e in read_events(state, "file_update")]


def cli(*args: str, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mplp_lsp", *args],
        capture_output=True,
        text=True,
        env=server_env(dict(env or {})),
        check=True,
        timeout=60,
    )
    return done.stdout


def stored_in(workspace: Path, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The file events ``mplp-lsp events`` shows for ``workspace`` (its own store)."""
    out = cli("events", "--json", "--kind", "file_update", "--workspace", str(workspace), env=env)
    return [json.loads(line)["payload"] for line in out.splitlines() if line.strip()]


def record(repo: Path, state: Path, path: str) -> None:
    """The PSG records ``path`` as it is now (content included), as a recorded save would."""
    cli(
        "emit", "file", "--workspace", str(repo), "--state-dir", str(state),
        "--path", path, "--change", "modified",
    )  # fmt: skip

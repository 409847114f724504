"""Every benchmark in bench/ runs to its end in its ``--quick`` mode (the smallest size that
exercises every code path; targets not judged), from the repository root, printing the
machine's load average at its start and end. A benchmark that needs a real part the machine
lacks (code-server, a browser, PostgreSQL) exits UNAVAILABLE with the reason: skipped here,
a failure under CI, which provides them all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchlib import ROOT, benchmarks
from benchlib.harness import UNAVAILABLE
from tests.required import unavailable

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("script", benchmarks(), ids=lambda path: path.name)
def test_quick_run(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT)), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode == UNAVAILABLE:
        unavailable(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    lines = done.stdout.splitlines()
    assert lines[0].startswith("load average at start: "), done.stdout[:500]
    assert lines[-1].startswith("load average at end: "), done.stdout[-500:]
    assert "NOT met" not in done.stdout  # --quick judges no target

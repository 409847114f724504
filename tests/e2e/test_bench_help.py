"""Every benchmark in bench/ starts the way the README says: ``python bench/NAME.py`` from the
repository root, here with ``--help``, which must print the usage (with ``--quick``) and measure
nothing. A refactor that breaks a benchmark's imports fails here; the benchmarks are found
by benchlib.benchmarks(), so a new one is covered without editing this file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchlib import ROOT, benchmarks


def test_benchmarks_are_found() -> None:
    names = [path.name for path in benchmarks()]
    assert "bench_lsp.py" in names
    assert "__init__.py" not in names  # bench/ is a folder of scripts, not a package


@pytest.mark.parametrize("script", benchmarks(), ids=lambda path: path.name)
def test_help_from_the_repository_root(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT)), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {script.name} "), done.stdout[:500]
    assert "--quick" in done.stdout
    assert "load average" not in done.stdout, "--help ran the benchmark"

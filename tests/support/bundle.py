"""editors/vscode/tools/bundle_server.py, loaded as a module (it is a script, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "editors" / "vscode" / "tools" / "bundle_server.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bundle_server", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bundle_server"] = module
    spec.loader.exec_module(module)
    return module


bundle_server = load()

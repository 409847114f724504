"""The version and the project's addresses are written once and repeated where they must be."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import mplp_lsp

REPO = Path(__file__).resolve().parents[2]
PACKAGE_JSON = json.loads((REPO / "editors" / "vscode" / "package.json").read_text())
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_vsix_carries_the_version_of_the_python_package() -> None:
    # server/mplp_lsp/__init__.py is the source; the wheel reads it (tool.hatch.version).
    assert PACKAGE_JSON["version"] == mplp_lsp.__version__


def test_the_extension_manifest_names_the_addresses_of_pyproject() -> None:
    urls = PROJECT["urls"]
    assert PACKAGE_JSON["repository"]["url"] == urls["Repository"] + ".git"
    assert PACKAGE_JSON["homepage"] == urls["Homepage"]
    assert PACKAGE_JSON["bugs"]["url"] == urls["Issues"]


def test_the_readmes_lazy_spec_installs_this_repository() -> None:
    owner_and_name = PROJECT["urls"]["Repository"].removeprefix("https://github.com/")
    for readme in ("README.md", "editors/nvim/README.md"):
        assert f'"{owner_and_name}"' in (REPO / readme).read_text(), readme

"""The tree mirrors docs/architecture.md: the package's top level holds packages, and each
package is one row of the architecture's table, so a newcomer can read the tree as the doc."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "server" / "mplp_lsp"
ARCHITECTURE = REPO / "docs" / "architecture.md"

# Top-level modules: the version, and ``python -m mplp_lsp`` (the doc's table names it).
TOP_LEVEL = {"__init__.py", "__main__.py"}


def table_rows() -> set[str]:
    """The first cell of each row of the architecture's table of packages."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([\w./]+)` \|", text, re.M))


def test_the_top_level_holds_only_the_package_entry_points() -> None:
    assert {path.name for path in PACKAGE.glob("*.py")} == TOP_LEVEL


def test_every_package_is_in_the_architecture() -> None:
    packages = {
        f"{path.name}/"
        for path in PACKAGE.iterdir()
        if path.is_dir() and (path / "__init__.py").is_file()
    }
    rows = table_rows()
    assert len(packages) > 10  # the tree was read
    assert packages - rows == set(), "add a row to docs/architecture.md"
    assert {row for row in rows if row.endswith("/")} - packages == set(), "a row names no package"

"""Which package may import which framework: read from the source, not from a running process.

pygls is the editor protocol: only ``lsp/`` speaks it, so the core stays usable by ``watch``,
the hooks and the CLI, and a pygls release touches one package. aiohttp is the network: the
loopback API (``api/``, whose client the CLI uses to ask a daemon), the collectors
(``collector/``) and the modules that send requests out (the forwarder's sender, the runtime's
``http``/``llm`` actions). Every import counts, at module level, inside functions and under
``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "mplp_lsp"

# framework -> the places (a package directory ending in "/", or one module) allowed to import it
ALLOWED: dict[str, tuple[str, ...]] = {
    "pygls": ("lsp/",),
    "aiohttp": ("api/", "collector/", "forward/sender.py", "runtime/ael/http.py"),
}


def imported_modules(source: str) -> Iterator[tuple[int, str]]:
    """(line, top-level module) for every absolute import anywhere in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def allowed(module: str, places: tuple[str, ...]) -> bool:
    return any(module.startswith(place) for place in places)


def violations(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        for line, name in imported_modules(path.read_text(encoding="utf-8")):
            places = ALLOWED.get(name)
            if places is not None and not allowed(module, places):
                found.append(f"{module}:{line} imports {name}")
    return found


def test_frameworks_are_imported_only_where_they_belong() -> None:
    assert violations(PACKAGE) == []


def test_the_package_is_really_read() -> None:
    # The allowed places do import them: a walk that found no module would pass vacuously.
    seen = {
        (path.relative_to(PACKAGE).as_posix(), name)
        for path in PACKAGE.rglob("*.py")
        for _, name in imported_modules(path.read_text(encoding="utf-8"))
    }
    assert ("lsp/server.py", "pygls") in seen
    assert ("forward/sender.py", "aiohttp") in seen


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("workspace.py", "import pygls.uris\n"),
        ("sources/files.py", "def f():\n    from pygls.uris import to_fs_path\n"),
        (
            "cli/status.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import aiohttp\n",
        ),
        ("forward/config.py", "from aiohttp import web\n"),
    ],
)
def test_an_import_in_the_wrong_place_is_found(tmp_path: Path, module: str, source: str) -> None:
    path = tmp_path / module
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    assert len(violations(tmp_path)) == 1


def test_relative_imports_and_lookalikes_are_not_frameworks(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text(
        "from . import aiohttp\nimport pygls_like\nfrom .pygls import y\n", encoding="utf-8"
    )
    assert violations(tmp_path) == []

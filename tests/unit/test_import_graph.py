"""Which package may import which framework, and that no module imports itself through
others: read from the source, not from a running process.

pygls is the editor protocol: only ``lsp/`` speaks it, so the core stays usable by ``watch``,
the hooks and the CLI, and a pygls release touches one package. aiohttp is the network: the
loopback API (``api/``, whose client the CLI uses to ask a daemon), the collectors
(``collector/``) and the modules that send requests out (the forwarder's sender, the runtime's
``http``/``llm`` actions). Every import counts, at module level, inside functions and under
``TYPE_CHECKING``.

No cycle, at any depth: an import deferred into a function or kept under ``TYPE_CHECKING``
still ties the two modules together (each must be read to understand the other, and moving one
breaks the other). A helper both sides need lives in a module both import. ``from package
import submodule`` is an import of the submodule (a package's ``__init__`` re-exporting its
parts is no cycle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "mplp_lsp"

# framework -> the places (a package directory ending in "/", or one module) allowed to import it
ALLOWED: dict[str, tuple[str, ...]] = {
    "pygls": ("lsp/",),
    "aiohttp": ("api/", "collector/", "forward/sender.py", "actions/http.py"),
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
        ("forward/remote.py", "from aiohttp import web\n"),
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


def module_names(package: Path) -> dict[str, Path]:
    """Dotted name (``mplp_lsp.lsp.server``) → file, for every module of the package."""
    names = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The package's modules ``module`` imports, anywhere in it."""
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:  # a submodule, or a name defined in ``source``
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in known else source)
    return {name for name in found if name in known and name != module}


def import_graph(package: Path) -> dict[str, set[str]]:
    known = module_names(package)
    return {module: imports_of(module, path, known) for module, path in known.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_at_any_depth() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 100  # the whole package was read
    assert "mplp_lsp.lsp.app" in graph["mplp_lsp.cli.serve"]  # a deferred import counts
    found = cycles(graph)
    assert found == [], "\n".join(
        " ↔ ".join(f"{m}→{sorted(graph[m] & set(group))}" for m in group) for group in found
    )


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # deferred into a function, two modules apart
            {
                "a.py": "import mplp_lsp.b\n",
                "b.py": "from mplp_lsp import c\n",
                "c.py": "def f():\n    from mplp_lsp.a import x\n",
            },
            [["mplp_lsp.a", "mplp_lsp.b", "mplp_lsp.c"]],
        ),
        (  # under TYPE_CHECKING, through a relative import
            {
                "p/__init__.py": "",
                "p/x.py": "from .y import Y\n",
                "p/y.py": "if TYPE_CHECKING:\n    from ..p.x import X\n",
            },
            [["mplp_lsp.p.x", "mplp_lsp.p.y"]],
        ),
        (  # a package re-exporting its submodules, which import each other's parts: no cycle
            {
                "p/__init__.py": "from mplp_lsp.p.x import X\n",
                "p/x.py": "from mplp_lsp.p import y\n",
                "p/y.py": "Y = 1\n",
            },
            [],
        ),
    ],
)
def test_a_cycle_is_found_however_it_is_hidden(
    tmp_path: Path, files: dict[str, str], expected: list[list[str]]
) -> None:
    package = tmp_path / "mplp_lsp"
    for name, source in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(source, encoding="utf-8")
    assert cycles(import_graph(package)) == expected

"""What more than one test file uses lives in tests/support/, never in a test module: a test
module imported by another runs its module-level code (and registers its fixtures) twice, and
hides a shared helper where nobody looks for one."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imports_of_test_modules(root: Path) -> list[str]:
    """``file:line module`` for every import (anywhere in a file) of a ``test_*`` module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.split(".")[-1].startswith("test_") for name in names):
                found.append(f"{path.relative_to(root)}:{node.lineno} {names[0]}")
    return found


def test_no_test_module_is_imported() -> None:
    assert imports_of_test_modules(TESTS) == []


def test_an_import_of_a_test_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def f():\n    from tests.e2e.test_b import helper\n")
    (tmp_path / "test_c.py").write_text("from tests.e2e import test_b\nimport tests.support.x\n")
    assert imports_of_test_modules(tmp_path) == [
        "test_a.py:2 tests.e2e.test_b",
        "test_c.py:1 tests.e2e",
    ]


def fixed_example_counts(root: Path) -> list[str]:
    """``file:line`` of every ``max_examples=`` not given through ``examples(n)``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        calls = ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        for node in (call for call in calls if isinstance(call, ast.Call)):
            for keyword in node.keywords:
                value = keyword.value
                through_examples = (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id == "examples"
                )
                if keyword.arg == "max_examples" and not through_examples:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_property_test_counts_its_examples_through_the_profile() -> None:
    # A fixed count would run in full in a contributor's quick run (tests/support/properties.py).
    assert fixed_example_counts(TESTS) == []


def test_a_fixed_example_count_is_found(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(
        "@settings(max_examples=50)\ndef f(): ...\n@settings(max_examples=examples(50))\n"
        "def g(): ...\n"
    )
    assert fixed_example_counts(tmp_path) == ["test_a.py:1"]

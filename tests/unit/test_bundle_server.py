"""editors/vscode/tools/bundle_server.py: merging the per-Python installs into one folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bundle import bundle_server


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_compiled_modules_of_each_python_sit_side_by_side(tmp_path: Path) -> None:
    common = {"pkg/__init__.py": "x = 1\n", "shared/_m.abi3.so": "abi3"}
    sources = {
        "3.11": tree(
            tmp_path / "a",
            {**common, "pkg/_c.cpython-311-x.so": "311", "pkg-1.dist-info/WHEEL": "cp311"},
        ),
        "3.12": tree(
            tmp_path / "b",
            {**common, "pkg/_c.cpython-312-x.so": "312", "pkg-1.dist-info/WHEEL": "cp312"},
        ),
    }
    libs = tmp_path / "libs"
    bundle_server.merge(sources, libs)
    found = {str(p.relative_to(libs)) for p in libs.rglob("*") if p.is_file()}
    assert found == {
        "pkg/__init__.py",
        "shared/_m.abi3.so",
        "pkg/_c.cpython-311-x.so",
        "pkg/_c.cpython-312-x.so",
        "pkg-1.dist-info/WHEEL",
    }
    assert (libs / "pkg-1.dist-info" / "WHEEL").read_text() == "cp311"


def test_a_python_file_that_differs_between_versions_stops_the_build(tmp_path: Path) -> None:
    sources = {
        "3.11": tree(tmp_path / "a", {"pkg/__init__.py": "version = 1\n"}),
        "3.13": tree(tmp_path / "b", {"pkg/__init__.py": "version = 2\n"}),
    }
    with pytest.raises(
        bundle_server.BundleError, match=r"pkg/__init__.py differs between Python 3.11 and 3.13"
    ):
        bundle_server.merge(sources, tmp_path / "libs")


def test_only_the_optional_speedups_are_dropped(tmp_path: Path) -> None:
    libs = tree(
        tmp_path,
        {
            "aiohttp/_http_parser.cpython-311-x.so": "",
            "yaml/_yaml.cp311-win_amd64.pyd": "",
            "aiohttp/web.py": "",
            "pydantic_core/_pydantic_core.cpython-311-x.so": "",
        },
    )
    bundle_server.drop_optional_speedups(libs)
    left = {str(p.relative_to(libs)) for p in libs.rglob("*") if p.is_file()}
    assert left == {"aiohttp/web.py", "pydantic_core/_pydantic_core.cpython-311-x.so"}


def test_a_wheel_of_another_version_than_the_extension_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "mplp_lsp-999.0.0-py3-none-any.whl"
    with pytest.raises(bundle_server.BundleError, match=r"999\.0\.0 but package\.json says"):
        bundle_server.bundle("linux-x64", wheel, tmp_path / "bundled")
    with pytest.raises(bundle_server.BundleError, match="no wheel set for target"):
        bundle_server.bundle("haiku-x64", wheel, tmp_path / "bundled")

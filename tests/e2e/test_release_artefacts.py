"""The sdist and wheel as PyPI and users get them: `twine check`, then `pipx install`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.dist import REPO, Dist

VSIX_VERSION = json.loads((REPO / "editors" / "vscode" / "package.json").read_text())["version"]


def test_twine_accepts_the_sdist_and_the_wheel(built_dist: Dist) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(built_dist.wheel),
            str(built_dist.sdist),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_wheel_carries_the_license_the_urls_and_the_schemas(built_dist: Dist) -> None:
    with zipfile.ZipFile(built_dist.wheel) as wheel:
        names = wheel.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = wheel.read(metadata).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Project-URL: Repository, https://" in text
    assert "Classifier: Programming Language :: Python :: 3.11" in text
    assert any(n.startswith("mplp_lsp/schemas/") for n in names)


def test_pipx_installs_the_wheel_and_mplp_lsp_reports_the_vsix_version(
    built_dist: Dist, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pipx",
            "install",
            "--python",
            sys.executable,
            str(built_dist.wheel),
        ],
        check=True,
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    done = subprocess.run(
        [str(tmp_path / "bin" / "mplp-lsp"), "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert done.stdout.strip() == f"mplp-lsp {VSIX_VERSION}"

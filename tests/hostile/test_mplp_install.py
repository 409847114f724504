"""``:MplpInstall mplp-lsp==0.1.0`` (the form the Neovim README suggests), typed in a real
headless Neovim whose current folder is a repository holding a folder of that very name
with a ``setup.py``: pip is asked for the requirement, and the folder's code never runs.

pip works offline here: no index, and the system's bundled wheels (pip, setuptools) as its
only source, so a build of the folder (what the plugin asked for before) would find the
setuptools it needs and run the planted ``setup.py``, while the requirement itself cannot
be found and the install fails with pip's own message.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.nvim_session import git_repo, run
from tests.required import unavailable

pytestmark = pytest.mark.e2e

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
WHEELS = Path("/usr/share/python-wheels")  # Debian's bundled pip and setuptools

BODY = r"""
require('mplp').setup({})
vim.cmd('MplpInstall mplp-lsp==0.1.0')
vim.wait(300000, function() return require('mplp.install').running == nil end, 200)
finish(0)
"""

PLANTED_SETUP = """
import pathlib
pathlib.Path({marker!r}).write_text("the repository's setup.py ran")
from setuptools import setup
setup(name="mplp-lsp", version="0.1.0")
"""


def test_mplp_install_of_a_requirement_never_builds_a_folder_of_that_name(
    tmp_path: Path,
) -> None:
    python = shutil.which("python3", path=SYSTEM_PATH)
    if python is None or subprocess.run([python, "-c", "import ensurepip"], check=False).returncode:
        unavailable("the system's python3 cannot create a venv (apt-get install python3-venv)")
    if not WHEELS.is_dir():
        unavailable("no bundled wheels in /usr/share/python-wheels (python3-pip-whl)")
    marker = tmp_path / "setup-py-ran"
    project = git_repo(tmp_path / "project")
    planted = project / "mplp-lsp==0.1.0"
    planted.mkdir()
    (planted / "setup.py").write_text(PLANTED_SETUP.format(marker=str(marker)))
    session = run(
        tmp_path,
        "install",
        BODY,
        {"ROOT": str(project), "STATE": str(tmp_path / "state")},
        cwd=project,
        env={
            "PATH": SYSTEM_PATH,
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(WHEELS),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
    )
    result: dict[str, Any] = session.result
    assert session.returncode == 0, (session.stderr, result)
    assert not marker.exists(), "the folder's setup.py ran"
    notes = "\n".join(result["notifications"])
    assert "installing mplp-lsp==0.1.0 (pip)" in notes, notes
    assert "install failed" in notes and "-- mplp-lsp==0.1.0" in notes, notes

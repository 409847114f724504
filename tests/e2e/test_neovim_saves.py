"""Issue 19 in a real Neovim with the plugin: what one user sees after saves and quick fixes.

* one ``file_update`` per ``:write`` (Neovim without inotifywait also reports each write as a
  watched-file change ~600 ms later), and an edit back to an earlier content is still one;
* "PSG wins" and "three-way merge" go through the buffer (the file changes when it is
  written, and then the resolution is recorded); a conflicted merge's markers are in the
  buffer and its finding stays open until then; no event names a scratch file;
* two workspaces in two splits: each window's statusline shows its own workspace;
* a folder without Git is recorded, as VS Code records an open folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import read_events
from tests.e2e.nvim_session import git_repo, run

pytestmark = pytest.mark.realhost

# Long enough for Neovim's own watcher (it holds a change ~500 ms without inotifywait) and
# the daemon's debounce to report a write's echo, if it were going to be recorded.
ECHO_WAIT_MS = 2000

SAVES = r"""
require('mplp').setup({ python = PYTHON, settings = { debounceMs = 100 } })
vim.cmd('edit ' .. ROOT .. '/src/hello.py')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client or not ready(client, buf) then return finish(3) end
for index, text in ipairs({ 'one = 1', 'two = 2', 'one = 1' }) do
  save(buf, text)
  if not vim.wait(30000, function() return #stored('file_update') >= index end, 100) then
    return finish(10 + index)
  end
  vim.wait(ECHO_WAIT_MS)  -- the watcher's report of the same write arrives meanwhile
end
step('saved')
finish(0)
"""


def _values(root: Path, state: Path, **more: str) -> dict[str, str]:
    return {"ROOT": str(root), "STATE": str(state), **more}


def _lua(body: str) -> str:
    return f"local ECHO_WAIT_MS = {ECHO_WAIT_MS}\n{body}"


def test_one_file_update_per_write_and_a_revert_is_recorded(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "project", {"src/hello.py": ""})
    state = tmp_path / "state"
    session = run(
        tmp_path,
        "saves",
        _lua(SAVES),
        _values(root, state),
        cwd=root,
        env={"MPLP_LSP_STATE_DIR": str(state)},
    )
    assert session.result["steps"] == ["saved"], (session.returncode, session.stderr[-2000:])
    events = [
        (e["payload"]["file_path"], e["payload"]["change_type"])
        for e in read_events(state, "file_update")
    ]
    # Three writes, the third back to the first one's content: three events, no echo.
    assert events == [("src/hello.py", "modified")] * 3


QUICK_FIXES = r"""
require('mplp').setup({ python = PYTHON, settings = { debounceMs = 100 } })
local function mplp_diagnostic(buf)
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.source == 'mplp' then return d end
  end
end
vim.cmd('edit ' .. ROOT .. '/a.py')
local a = vim.api.nvim_get_current_buf()
vim.cmd('split ' .. ROOT .. '/b.py')
local b = vim.api.nvim_get_current_buf()
local client = client_of(b)
if not client or not ready(client, b) then return finish(3) end
save(a, 'psg = "a"')
save(b, 'psg = "b"')
if not vim.wait(30000, function() return #stored('file_update') >= 2 end, 100) then return finish(4) end
vim.wait(ECHO_WAIT_MS)
-- Changed while nothing records: drift for both files.
client:stop()
if not vim.wait(10000, function() return client:is_stopped() end, 50) then return finish(5) end
for _, name in ipairs({ 'a', 'b' }) do
  local out = io.open(ROOT .. '/' .. name .. '.py', 'w')
  out:write('disk = "' .. name .. '"\n')
  out:close()
end
vim.cmd('MplpRestart')
vim.wait(30000, function()
  local now = vim.lsp.get_clients({ bufnr = b, name = 'mplp' })[1]
  return now ~= nil and now.id ~= client.id and now.initialized == true
end, 100)
client = client_of(b)
if not client or not ready(client, b) then return finish(6) end
vim.cmd('MplpDrift')
if not vim.wait(60000, function() return mplp_diagnostic(a) and mplp_diagnostic(b) end, 100) then
  return finish(7)
end
step('drift')
local function apply(buf, title)
  local found = mplp_diagnostic(buf).user_data.lsp
  vim.api.nvim_set_current_buf(buf)
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.lsp.buf.code_action({
    context = { only = { 'quickfix' }, diagnostics = { found } },
    filter = function(action) return action.title:find(title, 1, true) ~= nil end,
    apply = true,
  })
end
local function lines(buf) return vim.api.nvim_buf_get_lines(buf, 0, -1, false) end
local function write(buf) vim.api.nvim_buf_call(buf, function() vim.cmd('write') end) end
-- PSG wins: the recorded content in the buffer (one undoable edit); the file when it is saved.
apply(a, 'PSG wins')
if not vim.wait(30000, function() return lines(a)[1] == 'psg = "a"' end, 100) then return finish(8) end
result.a_modified = vim.bo[a].modified
result.a_disk_before = vim.fn.readfile(ROOT .. '/a.py')
write(a)
if not vim.wait(30000, function() return mplp_diagnostic(a) == nil end, 100) then return finish(9) end
-- The conflicted merge: the markers in the buffer, the finding open until it is saved.
apply(b, 'three-way merge')
if not vim.wait(30000, function()
  return vim.iter(lines(b)):any(function(l) return l:match('^<<<<<<<') ~= nil end)
end, 100) then return finish(10) end
-- Back to Neovim's main loop, where a :checktime from a callback takes effect (as after a
-- quick fix chosen by hand).
vim.defer_fn(function()
  result.a_buffer = lines(a)
  result.b_buffer = lines(b)
  result.b_disk_before = vim.fn.readfile(ROOT .. '/b.py')
  result.b_open = mplp_diagnostic(b) ~= nil
  result.statusline = require('mplp').statusline(b)
  write(b)
  vim.defer_fn(function()
    result.b_after_save = lines(b)
    result.b_modified = vim.bo[b].modified
    step('fixed')
    finish(0)
  end, ECHO_WAIT_MS)
end, ECHO_WAIT_MS)
"""


def test_quick_fixes_go_through_the_buffer_and_the_file_follows_its_save(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "project", {"a.py": 'base = "a"\n', "b.py": 'base = "b"\n'})
    state = tmp_path / "state"
    session = run(
        tmp_path,
        "fixes",
        _lua(QUICK_FIXES),
        _values(root, state),
        cwd=root,
        env={"MPLP_LSP_STATE_DIR": str(state)},
    )
    result: dict[str, Any] = session.result
    assert result["steps"] == ["drift", "fixed"], (session.returncode, session.stderr[-2000:])
    everything = json.dumps(read_events(state))
    assert ".mplp-restore" not in everything
    # PSG wins: the recorded content went into the buffer (the file unchanged until :write),
    # and the save put it in the file; buffer and file agree.
    assert result["a_modified"] is True
    assert result["a_disk_before"] == ['disk = "a"']
    assert (root / "a.py").read_text() == 'psg = "a"\n'
    assert result["a_buffer"] == ['psg = "a"']
    # The conflicted merge: markers in the buffer, the finding open, the file unchanged; then
    # the save writes the buffer, markers and all.
    assert any(line.startswith("<<<<<<<") for line in result["b_buffer"])
    assert result["b_disk_before"] == ['disk = "b"']
    assert result["b_open"] is True
    assert result["statusline"].endswith("drift 1")
    assert result["b_modified"] is False
    assert (root / "b.py").read_text() == "\n".join(result["b_after_save"]) + "\n"
    assert result["b_after_save"] == result["b_buffer"]
    resolved = [
        e["payload"].get("strategy")
        for e in read_events(state, "graph_update")
        if e["event_type"] == "file_drift_resolved"
    ]
    assert sorted(resolved) == ["merge", "psg"]


SPLITS = r"""
require('mplp').setup({ python = PYTHON, settings = { debounceMs = 100 } })
vim.cmd('edit ' .. ROOT .. '/one.py')
local one = vim.api.nvim_get_current_buf()
local first = vim.api.nvim_get_current_win()
vim.cmd('vsplit ' .. OTHER .. '/two.py')
local two = vim.api.nvim_get_current_buf()
local second = vim.api.nvim_get_current_win()
local c1, c2 = client_of(one), client_of(two)
if not (c1 and c2 and ready(c1, one) and ready(c2, two)) then return finish(3) end
result.clients = c1.id ~= c2.id
local function updates(client, buf)
  local status = status_of(client, buf)
  local folder = status and status.workspaces[1]
  return folder and folder.events_by_kind.file_update or 0
end
-- Two events in the first workspace, one in the second.
for index, text in ipairs({ 'a = 1', 'a = 2' }) do
  save(one, text)
  if not vim.wait(30000, function() return updates(c1, one) >= index end, 100) then
    return finish(4)
  end
end
save(two, 'b = 1')
local function line(win)
  local expr = "%{v:lua.require'mplp'.statusline()}"
  return vim.api.nvim_eval_statusline(expr, { winid = win, maxwidth = 200 }).str
end
local function today(client, buf)
  local status = status_of(client, buf)
  local folder = status and status.workspaces[1]
  return folder and folder.events_today
end
-- Each server's pushed status reaches its own window.
local done = vim.wait(30000, function()
  local n1, n2 = today(c1, one), today(c2, two)
  return n1 and n2 and n1 ~= n2
    and line(first):match('^mplp ' .. n1 .. ' today') ~= nil
    and line(second):match('^mplp ' .. n2 .. ' today') ~= nil
end, 200)
result.first, result.second = line(first), line(second)
step(done and 'separate' or 'shared')
finish(0)
"""


def test_two_workspaces_in_two_splits_keep_their_own_statusline(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "one", {"one.py": ""})
    other = git_repo(tmp_path / "two", {"two.py": ""})
    session = run(
        tmp_path,
        "splits",
        SPLITS,
        _values(root, tmp_path / "unused", OTHER=str(other)),
        cwd=tmp_path,
        env={"XDG_STATE_HOME": str(tmp_path / "stores")},
    )
    result = session.result
    assert result["steps"] == ["separate"], (result, session.stderr[-2000:])
    assert result["clients"] is True
    assert result["first"] != result["second"]


NO_GIT = r"""
require('mplp').setup({ python = PYTHON, settings = { debounceMs = 100 } })
vim.cmd('edit ' .. ROOT .. '/notes.txt')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client or not ready(client, buf) then return finish(3) end
result.root = status_of(client, buf).workspaces[1].root
save(buf, 'written without Git')
if not vim.wait(30000, function() return #stored('file_update') >= 1 end, 100) then return finish(4) end
step('stored')
finish(0)
"""


def test_a_folder_without_git_is_recorded_like_vscode_records_it(tmp_path: Path) -> None:
    root = (tmp_path / "plain").resolve()
    root.mkdir()
    (root / "notes.txt").write_text("")
    state = tmp_path / "state"
    session = run(
        tmp_path,
        "nogit",
        NO_GIT,
        _values(root, state),
        cwd=root,  # Neovim started in the folder, as VS Code opens it
        env={"MPLP_LSP_STATE_DIR": str(state)},
    )
    assert session.result["steps"] == ["stored"], (session.result, session.stderr[-2000:])
    assert session.result["root"] == str(root)
    assert [e["payload"]["file_path"] for e in read_events(state, "file_update")] == ["notes.txt"]

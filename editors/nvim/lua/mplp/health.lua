--- :checkhealth mplp — Neovim, the mplp-lsp command and its version, and each running
--- server's store and state.
local M = {}

local health = vim.health

local function check_neovim()
  local v = vim.version()
  local text = ('Neovim %d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok(text)
  else
    health.error(text .. ': mplp needs Neovim 0.11 or newer (vim.lsp.config / vim.lsp.enable)')
  end
end

--- The command that prints the version: `serve` replaced by `--version`.
local function version_cmd(cmd)
  local out = {}
  for _, part in ipairs(cmd) do
    if part == 'serve' then
      break
    end
    table.insert(out, part)
  end
  table.insert(out, '--version')
  return out
end

local function check_server()
  local mplp = require('mplp')
  local config = vim.lsp.config.mplp
  local cmd = config and config.cmd
  if type(cmd) == 'function' then
    health.info('cmd is a function; not checked')
    return
  end
  local problem = mplp.start_problem(cmd)
  if problem then
    health.error(problem)
    return
  end
  local done = vim.system(version_cmd(cmd), { text = true, cwd = mplp.server_cwd() }):wait()
  local version = vim.trim(done.stdout or '')
  if done.code == 0 and version ~= '' then
    health.ok(('%s (%s)'):format(version, table.concat(cmd, ' ')))
  else
    health.error(('`%s` failed: %s'):format(table.concat(version_cmd(cmd), ' '), vim.trim(done.stderr or '')))
  end
end

--- The environment :MplpInstall manages, and whether the server starts from it.
local function check_install()
  local install = require('mplp.install')
  if not install.installed() then
    health.info(('no :MplpInstall environment (%s); run :MplpInstall to install mplp-lsp from PyPI into it'):format(install.dir()))
    return
  end
  local done = vim.system({ install.python(), '-I', '-m', 'mplp_lsp', '--version' },
    { text = true, cwd = require('mplp').server_cwd() }):wait()
  if done.code ~= 0 then
    health.error(('%s is broken: %s; run :MplpInstall again'):format(install.dir(), vim.trim(done.stderr or '')))
    return
  end
  local cmd = (vim.lsp.config.mplp or {}).cmd
  local used = type(cmd) == 'table' and cmd[1] == install.python()
  health.ok(('%s in %s%s'):format(vim.trim(done.stdout), install.dir(),
    used and ', used to start the server' or ', not used: setup() names a `cmd` or `python`'))
end

local function shown(value)
  return (value == nil or value == vim.NIL) and '?' or tostring(value)
end

local function check_daemons()
  local mplp = require('mplp')
  local clients = vim.lsp.get_clients({ name = 'mplp' })
  if #clients == 0 then
    health.info('no mplp-lsp server is running (it starts for a file inside a workspace)')
    return
  end
  for _, client in ipairs(clients) do
    health.start(('server %d (%s)'):format(client.id, shown(client.root_dir)))
    local reply = client:request_sync('mplp/status', vim.NIL, 5000)
    local status = reply and reply.result or mplp.state.by_client[client.id]
    if type(status) ~= 'table' then
      health.warn('no status from the server' .. (reply and reply.err and (': ' .. reply.err.message) or ''))
    else
      if status.ready then
        health.ok(('mplp-lsp %s, ready'):format(shown(status.version)))
      else
        health.warn('still starting')
      end
      if #(status.workspaces or {}) == 0 then
        health.warn('records no folder (see :LspLog)')
      end
      for _, folder in ipairs(status.workspaces or {}) do
        if folder.role == 'follower' then
          health.info(('%s: another editor\'s server (pid %s) records it; this one hands its events over and takes over when it exits (store %s)'):format(
            shown(folder.root), shown(folder.owner_pid), shown(folder.state_dir)))
        else
          local report = folder.store_health == 'ok' and health.ok or health.warn
          report(('%s: recording; store %s (%s), %s event(s), drift %s'):format(
            shown(folder.root), shown(folder.state_dir), shown(folder.store_health),
            shown(folder.events_total), shown(folder.drift)))
        end
      end
    end
  end
end

function M.check()
  health.start('mplp: Neovim')
  check_neovim()
  health.start('mplp: :MplpInstall')
  check_install()
  health.start('mplp: the mplp-lsp command')
  check_server()
  health.start('mplp: running servers')
  check_daemons()
end

return M

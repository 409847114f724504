--- :MplpInstall [path-or-requirement]: mplp-lsp in a virtual environment of the plugin's own,
--- `stdpath('data')/mplp-lsp`, from PyPI (a requirement) or from a local project folder or
--- archive (a path: it has a `/`, or ends in .whl or .tar.gz). The plugin
--- starts the server from it when setup() names no `cmd` or `python`.
local M = {}

--- What an install is doing, while one runs (one at a time).
M.running = nil

local MIN_PYTHON = { 3, 11 }

function M.dir()
  return vim.fs.joinpath(vim.fn.stdpath('data'), 'mplp-lsp')
end

--- The environment's interpreter (it may not exist yet).
function M.python()
  if vim.fn.has('win32') == 1 then
    return vim.fs.joinpath(M.dir(), 'Scripts', 'python.exe')
  end
  return vim.fs.joinpath(M.dir(), 'bin', 'python')
end

function M.installed()
  return vim.fn.executable(M.python()) == 1
end

--- The Python that creates the environment: setup's `install_python`, else python3, else python.
function M.base_python(configured)
  if configured then
    return configured
  end
  for _, name in ipairs({ 'python3', 'python' }) do
    if vim.fn.executable(name) == 1 then
      return name
    end
  end
  return nil
end

--- Whether a source names a local folder or archive: it holds a path separator, or it ends in
--- `.whl` or `.tar.gz`. Anything else is a requirement (`mplp-lsp==0.2.0`), even where the
--- current folder has an entry of that name: typed inside a repository, a folder called
--- `mplp-lsp==0.1.0` there must not be built (its setup.py would run).
function M.is_path(source)
  return source:find('/', 1, true) ~= nil
    or (vim.fn.has('win32') == 1 and source:find('\\', 1, true) ~= nil)
    or source:match('%.whl$') ~= nil
    or source:match('%.tar%.gz$') ~= nil
end

--- The pip arguments for a source: PyPI's mplp-lsp, a local folder or archive by absolute
--- path, or a requirement. A requirement follows `--`, so pip never reads it as an option.
function M.pip_args(source)
  if source == nil or source == '' then
    return { '--', 'mplp-lsp' }
  end
  if M.is_path(source) then
    return { vim.fs.normalize(vim.fn.fnamemodify(source, ':p')) }
  end
  return { '--', source }
end

local function notify(message, level)
  vim.notify('mplp: ' .. message, level or vim.log.levels.INFO)
end

local function last_lines(text, count)
  local lines = vim.split(vim.trim(text or ''), '\n')
  return table.concat(vim.list_slice(lines, math.max(1, #lines - count + 1)), '\n')
end

--- Run the steps one after the other, each `{ title?, argv, check? }`; `check(stdout)` returns
--- an error message or nil. A step with a title is announced as `title (n/m)`. Calls
--- `done(ok, stdout of the last step, or the problem)` on the main loop.
local function run_steps(steps, done, index, stdout)
  index = index or 1
  local step = steps[index]
  if not step then
    return done(true, stdout)
  end
  if step.title then
    notify(('%s (%d/%d)'):format(step.title, step.number, steps.titled))
  end
  M.running = step.title or M.running
  local ok, err = pcall(vim.system, step.argv, { text = true, cwd = require('mplp').server_cwd() }, function(result)
    vim.schedule(function()
      local problem
      if result.code ~= 0 then
        problem = ('`%s` failed (exit %d):\n%s'):format(table.concat(step.argv, ' '), result.code,
          last_lines(result.stderr ~= '' and result.stderr or result.stdout, 8))
      elseif step.check then
        problem = step.check(result.stdout)
      end
      if problem then
        return done(false, problem)
      end
      run_steps(steps, done, index + 1, vim.trim(result.stdout or ''))
    end)
  end)
  if not ok then
    done(false, ('%s could not be started: %s'):format(step.argv[1], err))
  end
end

local function version_check(stdout)
  local major, minor = (stdout or ''):match('(%d+)%.(%d+)')
  major, minor = tonumber(major), tonumber(minor)
  if not major or major < MIN_PYTHON[1] or (major == MIN_PYTHON[1] and minor < MIN_PYTHON[2]) then
    return ('mplp-lsp needs Python %d.%d or newer; this one is %s. Install a newer Python and '
      .. 'set `install_python` in require("mplp").setup to it'):format(MIN_PYTHON[1], MIN_PYTHON[2],
      vim.trim(stdout or '?'))
  end
  return nil
end

---@param source? string a local folder or archive (see is_path), or a pip requirement; default PyPI's mplp-lsp
---@param opts? { python?: string, on_done?: fun(ok: boolean, message: string) }
function M.install(source, opts)
  opts = opts or {}
  local on_done = opts.on_done or function() end
  if M.running then
    notify('an install is already running: ' .. M.running, vim.log.levels.WARN)
    return on_done(false, 'already running')
  end
  local base = M.base_python(opts.python)
  if not base then
    local message = 'no Python found to install mplp-lsp with: install Python 3.11 or newer '
      .. '(python3 on the PATH), or set `install_python` in require("mplp").setup'
    notify(message, vim.log.levels.ERROR)
    return on_done(false, message)
  end
  local pip_args = M.pip_args(source)
  local requirement = pip_args[#pip_args]
  local venv = M.python()
  M.running = 'starting'
  local steps = {
    { argv = { base, '-I', '-c', 'import sys; print("%d.%d" % sys.version_info[:2])' }, check = version_check },
    { title = 'creating the environment ' .. M.dir(), argv = { base, '-m', 'venv', M.dir() } },
    {
      title = ('installing %s (pip)'):format(requirement),
      argv = vim.list_extend({ venv, '-m', 'pip', 'install', '--disable-pip-version-check', '--upgrade' }, pip_args),
    },
    { argv = { venv, '-I', '-m', 'mplp_lsp', '--version' } },
  }
  steps.titled = 0
  for _, step in ipairs(steps) do
    if step.title then
      steps.titled = steps.titled + 1
      step.number = steps.titled
    end
  end
  run_steps(steps, function(ok, message)
    M.running = nil
    if ok then
      notify(('%s installed in %s'):format(message, M.dir()))
      require('mplp').use_installed()
    else
      notify('install failed: ' .. message, vim.log.levels.ERROR)
    end
    on_done(ok, message)
  end)
end

return M

--- mplp-lsp in Neovim 0.11+: configuration, user commands, status for the statusline.
---
--- require('mplp').setup({
---   python = '/path/to/venv/bin/python',  -- or cmd = { 'mplp-lsp', 'serve' }; neither: :MplpInstall's
---   settings = { debounceMs = 300 },      -- the `mplp` settings (docs/settings.md)
--- })
local M = {}

local NAME = 'mplp'
local STATUS = 'mplp/status'
local SCAN_DRIFT = 'mplp.scanDrift'
local INSTALL_HOOKS = 'mplp.installHooks'
local OPEN_DASHBOARD = 'mplp.openDashboard'

--- The last `mplp/status` each server (by client id) sent, and the work it reports progress
--- on. One server runs per workspace, so a window shows the status of its own buffer's server.
M.state = { by_client = {}, progress = {} }

---@class mplp.Options
---@field cmd? string[] how to start the server (default: the :MplpInstall environment, else `mplp-lsp serve`)
---@field python? string a Python with mplp_lsp installed; runs `python -m mplp_lsp serve`
---@field install_python? string the Python (3.11+) :MplpInstall creates its environment with (default python3)
---@field settings? table the `mplp` settings
---@field enable? boolean call vim.lsp.enable('mplp') (default true)

--- The options of the last setup() (:MplpInstall reads `install_python`).
M.options = {}

--- -I: isolated, so neither the working directory nor PYTHON* variables reach sys.path.
local function python_cmd(python)
  return { python, '-I', '-m', 'mplp_lsp', 'serve' }
end

--- The command when setup() names none: the :MplpInstall environment when it exists.
function M.default_cmd()
  local install = require('mplp.install')
  return install.installed() and python_cmd(install.python()) or { 'mplp-lsp', 'serve' }
end

---@param opts? mplp.Options
function M.setup(opts)
  opts = opts or {}
  M.options = opts
  local config = {}
  if opts.cmd then
    config.cmd = opts.cmd
  elseif opts.python then
    config.cmd = python_cmd(opts.python)
  else
    config.cmd = M.default_cmd()
  end
  if opts.settings then
    config.settings = { mplp = opts.settings }
  end
  vim.lsp.config(NAME, config)
  if opts.enable ~= false then
    vim.lsp.enable(NAME)
    -- vim.lsp.enable attaches on FileType, which never fires for a file of no known type.
    vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
      group = vim.api.nvim_create_augroup('mplp.untyped', {}),
      callback = function(args)
        if vim.bo[args.buf].filetype == '' then
          M.attach(args.buf)
        end
      end,
    })
  end
end

--- The workspace of a buffer: its Git work tree, else Neovim's working directory when the
--- file is inside it (a folder without Git is recorded too, as VS Code does for an open
--- folder); nil for other buffers (no server starts for them).
function M.root(buf)
  if vim.bo[buf].buftype ~= '' then
    return nil
  end
  local git = vim.fs.root(buf, '.git')
  if git then
    return git
  end
  local name = vim.api.nvim_buf_get_name(buf)
  local cwd = vim.uv.cwd()
  if name == '' or not cwd then
    return nil
  end
  local file = vim.fs.normalize(vim.fs.abspath(name))
  cwd = vim.fs.normalize(cwd)
  if cwd ~= vim.fs.normalize(vim.uv.os_homedir() or '') and vim.fs.relpath(cwd, file) then
    return cwd
  end
  return nil
end

--- Where the server process starts: a folder of Neovim's own, outside every workspace.
function M.server_cwd()
  local dir = vim.fn.stdpath('run')
  vim.fn.mkdir(dir, 'p')
  return dir
end

--- Start (or reuse) the client for a buffer inside a workspace.
function M.attach(buf)
  local root = M.root(buf)
  if root then
    vim.lsp.start(vim.tbl_extend('force', vim.lsp.config[NAME], { root_dir = root }), { bufnr = buf })
  end
end

local function client_for(buf)
  return vim.lsp.get_clients({ bufnr = buf or 0, name = NAME })[1] or vim.lsp.get_clients({ name = NAME })[1]
end

local function has_command(client, name)
  local provider = client.server_capabilities.executeCommandProvider
  return type(provider) == 'table' and vim.list_contains(provider.commands or {}, name)
end

local function notify(message, level)
  vim.notify('mplp: ' .. message, level or vim.log.levels.INFO)
end

-- --- status -------------------------------------------------------------------------------

local function number(value)
  return type(value) == 'number' and value or nil
end

--- Sum of the values present; nil when no folder reports the field (an older server).
local function total(folders, get)
  local sum
  for _, folder in ipairs(folders) do
    local ok, value = pcall(get, folder)
    value = ok and number(value) or nil
    if value then
      sum = (sum or 0) + value
    end
  end
  return sum
end

local function text(value)
  return type(value) == 'string' and value ~= '' and value or nil
end

--- A folder's `forward` (outbox and remote); nil when the store has none (JSON null).
local function forward_of(folder)
  return type(folder.forward) == 'table' and folder.forward or nil
end

--- States in which the outbox is not draining; the server says why.
local TROUBLE = { waiting = true, misconfigured = true }

--- The folders a status reports that this process records (a follower hands its events to
--- another editor's server and reports no counts of its own).
local function owned(folders)
  return vim.tbl_filter(function(folder)
    return folder.role ~= 'follower'
  end, folders)
end

--- The status summed over workspace folders, read as the server sends it
--- (server/mplp_lsp/engine/status.py): `forward` = {state, remote, depth, ...} or null,
--- `drift` and `drift_deferred` numbers. Fields the server does not report stay nil.
function M.summary(status)
  if type(status) ~= 'table' then
    return nil
  end
  local all = type(status.workspaces) == 'table' and status.workspaces or {}
  local folders = owned(all)
  local following = #folders < #all and all[1] or nil
  for _, folder in ipairs(all) do
    if folder.role == 'follower' then
      following = folder
    end
  end
  local states, problem = {}, nil
  for _, folder in ipairs(folders) do
    local forward = forward_of(folder)
    local state = forward and text(forward.state)
    if state and not vim.list_contains(states, state) then
      table.insert(states, state)
    end
    if state and TROUBLE[state] then
      problem = problem or text(forward.problem) or text(forward.last_error)
    end
  end
  return {
    ready = status.ready == true,
    folders = #folders,
    following = following and { owner_pid = following.owner_pid, handed = following.handed } or nil,
    events_today = total(folders, function(f)
      return f.events_today
    end) or 0,
    outbox_depth = total(folders, function(f)
      return forward_of(f).depth
    end),
    remote = #states > 0 and table.concat(states, '/') or nil,
    remote_problem = problem,
    drift = total(folders, function(f)
      return f.drift
    end),
    drift_deferred = total(folders, function(f)
      return f.drift_deferred
    end),
  }
end

local function shown_pid(value)
  return type(value) == 'number' and tostring(value) or '?'
end

--- The client serving a buffer, and the part of its status about that buffer's folder.
local function status_for(buf)
  local client = vim.lsp.get_clients({ bufnr = buf, name = NAME })[1]
  if not client then
    return nil, nil
  end
  local status = M.state.by_client[client.id]
  if type(status) ~= 'table' or type(status.workspaces) ~= 'table' or #status.workspaces < 2 then
    return client, status
  end
  local file = vim.fs.normalize(vim.api.nvim_buf_get_name(buf))
  local best
  for _, folder in ipairs(status.workspaces) do
    if type(folder.root) == 'string' and vim.fs.relpath(folder.root, file) then
      if not best or #folder.root > #best.root then
        best = folder
      end
    end
  end
  return client, best and vim.tbl_extend('force', status, { workspaces = { best } }) or status
end

--- The status of the server of a buffer (default: the current one), as it last sent it.
function M.status(buf)
  local _, status = status_for(buf or 0)
  return status
end

--- For the statusline of a window: `mplp 12 today · outbox 3 · remote ok · drift 2` for the
--- workspace of the window's buffer, `mplp: following pid 123` while another editor's server
--- records it, '' when no server serves the buffer.
--- Example: vim.o.statusline = "%f %= %{v:lua.require'mplp'.statusline()}"
function M.statusline(buf)
  if not buf then
    local win = vim.g.statusline_winid
    buf = (win and vim.api.nvim_win_is_valid(win)) and vim.api.nvim_win_get_buf(win) or 0
  end
  local client, status = status_for(buf)
  if not client then
    return ''
  end
  local progress = M.state.progress[client.id]
  if progress then
    local percent = progress.percentage and (' ' .. progress.percentage .. '%') or ''
    return 'mplp: ' .. (progress.title or 'working') .. percent
  end
  local summary = M.summary(status)
  if not summary then
    return ''
  end
  if not summary.ready then
    return 'mplp: starting'
  end
  if summary.following then
    return ('mplp: following pid %s · handed %d'):format(
      shown_pid(summary.following.owner_pid),
      number(summary.following.handed) or 0
    )
  end
  if summary.folders == 0 then
    return 'mplp: not recording'
  end
  local parts = { ('mplp %d today'):format(summary.events_today) }
  if summary.outbox_depth then
    table.insert(parts, ('outbox %d'):format(summary.outbox_depth))
  end
  if summary.remote then
    table.insert(parts, 'remote ' .. summary.remote)
  end
  if summary.drift then
    table.insert(parts, ('drift %d'):format(summary.drift))
  end
  return table.concat(parts, ' · ')
end

local function changed()
  vim.api.nvim_exec_autocmds('User', { pattern = 'MplpStatus', modeline = false })
  vim.cmd.redrawstatus({ bang = true })
end

function M.on_status(result, ctx)
  M.state.by_client[ctx and ctx.client_id or 0] = result
  changed()
end

--- Work-done progress of an mplp client (an LspProgress event's params).
function M.on_progress(params, client_id)
  local value = params and params.value or {}
  local now = M.state.progress[client_id]
  if value.kind == 'end' then
    M.state.progress[client_id] = nil
  elseif value.kind == 'begin' then
    M.state.progress[client_id] = { title = value.title, percentage = value.percentage }
  elseif now then
    now.percentage = value.percentage or now.percentage
  end
  changed()
end

--- The server's command for a Python: the interpreter, when the command runs `-m mplp_lsp`.
local function python_of(cmd)
  if type(cmd) ~= 'table' then
    return nil
  end
  for i = 2, #cmd - 1 do
    if cmd[i] == '-m' and cmd[i + 1] == 'mplp_lsp' then
      return cmd[1]
    end
  end
  return nil
end

--- After :MplpInstall: start the servers from the new environment, unless setup() named a
--- command or a Python of its own.
function M.use_installed()
  if M.options.cmd or M.options.python then
    return
  end
  vim.lsp.config(NAME, { cmd = M.default_cmd() })
  M.restart()
end

--- Why a command cannot start mplp-lsp, in words that name the fix; nil when it looks fine.
function M.start_problem(cmd)
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' then
    return 'no command to start mplp-lsp; run :MplpInstall, or set `cmd` or `python` in require("mplp").setup'
  end
  if vim.fn.executable(cmd[1]) ~= 1 then
    return ('%s is not an executable; run :MplpInstall (mplp-lsp from PyPI into its own environment), '
      .. 'or set `python` in require("mplp").setup to a Python that has mplp-lsp'):format(cmd[1])
  end
  local python = python_of(cmd)
  if python then
    local done = vim.system({ python, '-I', '-c', 'import mplp_lsp' }, { cwd = M.server_cwd() }):wait()
    if done.code ~= 0 then
      return ('%s has no mplp_lsp module: install it there (%s -m pip install mplp-lsp) or set '
        .. '`python` in require("mplp").setup to a Python that has it'):format(python, python)
    end
  end
  return nil
end

--- The server process ended; a failure is explained (not just "quit with exit code 1").
function M.on_exit(code, client_id)
  M.state.by_client[client_id] = nil
  M.state.progress[client_id] = nil
  vim.schedule(function()
    changed()
    if code ~= 0 then
      local problem = M.start_problem((vim.lsp.config[NAME] or {}).cmd)
      notify(problem or ('mplp-lsp exited with code %d; see :checkhealth mplp and :LspLog'):format(code),
        vim.log.levels.ERROR)
    end
  end)
end

local function shown(value)
  if value == nil or value == vim.NIL then
    return 'not reported'
  end
  return type(value) == 'table' and vim.json.encode(value) or tostring(value)
end

--- A folder's forwarding in one line: state, remote, outbox, counters, last error.
local function forward_line(forward)
  if not forward then
    return 'not reported (a store without an outbox)'
  end
  local line = ('%s to %s; outbox %s, delivered %s, dead-lettered %s'):format(
    shown(forward.state),
    text(forward.remote) or 'no remote',
    shown(forward.depth),
    shown(forward.delivered),
    shown(forward.dead_lettered)
  )
  local age = number(forward.oldest_pending_age_s)
  if age then
    line = line .. (', oldest waiting %s s'):format(age)
  end
  local problem = text(forward.problem) or text(forward.last_error)
  return problem and (line .. '; last error: ' .. problem) or line
end

--- A folder's forwarding lines: one, or one per sink in use (named) when several are.
local function forward_lines(forward)
  local in_use = {}
  if forward and type(forward.sinks) == 'table' then
    for name, sink in vim.spairs(forward.sinks) do
      if type(sink) == 'table' and (sink.enabled == true or text(sink.remote)) then
        table.insert(in_use, { name = name, sink = sink })
      end
    end
  end
  if #in_use < 2 then
    return { '  forwarding: ' .. forward_line(forward) }
  end
  local lines = {}
  for _, each in ipairs(in_use) do
    table.insert(lines, ('  forwarding (%s): %s'):format(each.name, forward_line(each.sink)))
  end
  return lines
end

--- The lines :MplpStatus prints.
function M.status_lines(status)
  local summary = M.summary(status)
  if not summary then
    return { 'mplp: no status yet' }
  end
  local lines = {
    ('mplp-lsp %s, %s; refused input: %s'):format(
      shown(status.version),
      summary.ready and 'ready' or 'starting',
      shown(status.refused or 0)
    ),
    ('events today: %d in %d folder(s)'):format(summary.events_today, summary.folders),
    'outbox depth: ' .. shown(summary.outbox_depth),
    'remote: ' .. shown(summary.remote) .. (summary.remote_problem and (': ' .. summary.remote_problem) or ''),
    'drift: ' .. shown(summary.drift) .. ((summary.drift_deferred or 0) > 0 and (' (' .. summary.drift_deferred .. ' deferred)') or ''),
  }
  for _, folder in ipairs(status.workspaces or {}) do
    local kinds = {}
    if folder.role == 'follower' then
      vim.list_extend(lines, {
        '',
        shown(folder.root),
        ('  following: the store is recorded by pid %s; this server handed it %s event(s) and '
          .. 'takes over when it exits'):format(shown_pid(folder.owner_pid), shown(folder.handed)),
        '  store: ' .. shown(folder.state_dir),
      })
      goto continue
    end
    for kind, count in vim.spairs(folder.events_by_kind or {}) do
      table.insert(kinds, ('%s %d'):format(kind, count))
    end
    vim.list_extend(lines, {
      '',
      shown(folder.root),
      '  events: ' .. shown(folder.events_total) .. (#kinds > 0 and (' (' .. table.concat(kinds, ', ') .. ')') or ''),
      '  last event: ' .. shown(folder.last_event_time),
      '  rejected: ' .. shown(folder.rejected),
    })
    vim.list_extend(lines, forward_lines(forward_of(folder)))
    vim.list_extend(lines, {
      '  drift: ' .. shown(folder.drift) .. ' open, ' .. shown(folder.drift_deferred) .. ' deferred',
      '  store: ' .. shown(folder.state_dir) .. ' (' .. shown(folder.store_health) .. ')',
    })
    ::continue::
  end
  return lines
end

function M.show_status()
  local client = client_for(0)
  if not client then
    return notify('mplp-lsp is not running for this buffer', vim.log.levels.WARN)
  end
  local reply = client:request_sync(STATUS, vim.NIL, 5000, 0)
  local status = reply and reply.result or M.state.by_client[client.id]
  if reply and reply.result then
    M.state.by_client[client.id] = reply.result
  end
  local chunks = {}
  for _, line in ipairs(M.status_lines(status)) do
    table.insert(chunks, { line .. '\n' })
  end
  vim.api.nvim_echo(chunks, true, {})
end

-- --- server commands ----------------------------------------------------------------------

local function folder_name(root)
  return type(root) == 'string' and vim.fs.basename(root) or '?'
end

--- What to tell the user about a server command's answer (shapes: lsp/drift.py, lsp/hooks.py).
--- Returns the message and whether some folder could not do it.
function M.describe(name, result)
  local entries = vim.tbl_filter(function(entry)
    return type(entry) == 'table'
  end, vim.islist(result) and result or {})
  if name == SCAN_DRIFT then
    local drifted, checked, moved, cancelled = 0, 0, {}, false
    for _, scan in ipairs(entries) do
      drifted = drifted + (number(scan.drifted) or 0)
      checked = checked + (number(scan.checked) or 0)
      if type(scan.repository) == 'table' then
        table.insert(moved, folder_name(scan.root))
      end
      cancelled = cancelled or scan.cancelled == true
    end
    local message = ('drift scan: %d drifted of %d file(s) checked'):format(drifted, checked)
    if #moved > 0 then
      message = message .. '; the repository moved in ' .. table.concat(moved, ', ')
    end
    return message .. (cancelled and ' (cancelled)' or ''), false
  elseif name == INSTALL_HOOKS then
    local done, parts, failed = {}, {}, false
    for _, folder in ipairs(entries) do
      if type(folder.hooks) == 'table' then
        table.insert(done, folder_name(folder.root))
      end
    end
    if #done > 0 then
      table.insert(parts, 'Git hooks installed in ' .. table.concat(done, ', '))
    end
    for _, folder in ipairs(entries) do
      if type(folder.error) == 'string' then
        table.insert(parts, ('not in %s: %s'):format(folder_name(folder.root), folder.error))
        failed = true
      end
    end
    return #parts > 0 and table.concat(parts, '; ') or 'no workspace folder', failed
  elseif name == OPEN_DASHBOARD and type(result) == 'table' then
    if type(result.error) == 'string' then
      return 'no dashboard: ' .. result.error, true
    elseif result.shown then
      return 'dashboard of ' .. folder_name(result.root) .. ' opened in the browser', false
    end
    -- No browser opened it: the private page (readable by this user only) to open by hand.
    return ('dashboard of %s: open %s in a browser (once, within a minute)'):format(
      folder_name(result.root), tostring(result.page)), false
  end
  return type(result) == 'string' and result or (name .. ': done'), false
end

--- Run a server command; false when this server does not have it.
local function server_command(name)
  local client = client_for(0)
  if not client then
    notify('mplp-lsp is not running for this buffer', vim.log.levels.WARN)
    return nil
  end
  if not has_command(client, name) then
    return false
  end
  client:exec_cmd({ title = name, command = name, arguments = {} }, { bufnr = 0 }, function(err, result)
    if err then
      return notify(name .. ' failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    local message, failed = M.describe(name, result)
    notify(message, failed and vim.log.levels.WARN or vim.log.levels.INFO)
  end)
  return true
end

function M.scan_drift()
  if server_command(SCAN_DRIFT) == false then
    notify('this mplp-lsp does not detect drift yet; update mplp-lsp', vim.log.levels.WARN)
  end
end

--- The server installs the hook in each folder, into the store it records into.
function M.install_hooks()
  if server_command(INSTALL_HOOKS) == false then
    notify(
      'this mplp-lsp cannot install Git hooks from the editor; update it, or run `mplp-lsp hooks install --state-dir <its state dir>`',
      vim.log.levels.WARN
    )
  end
end

--- The server asks its API for a one-time login code, writes the private page that hands it
--- to the dashboard, and has Neovim open that page in the browser (window/showDocument,
--- external: vim.ui.open gets the page's file URL, never the code).
function M.open_dashboard()
  if server_command(OPEN_DASHBOARD) == false then
    notify('this mplp-lsp has no dashboard; update it, or run `mplp-lsp ui --open`', vim.log.levels.WARN)
  end
end

function M.restart()
  local clients = vim.lsp.get_clients({ name = NAME })
  local buffers = {}
  for _, client in ipairs(clients) do
    vim.list_extend(buffers, vim.tbl_keys(client.attached_buffers))
    client:stop()
  end
  for _, client in ipairs(clients) do
    M.state.by_client[client.id], M.state.progress[client.id] = nil, nil
  end
  local function start_when_stopped(tries)
    for _, client in ipairs(clients) do
      if not client:is_stopped() and tries > 0 then
        return vim.defer_fn(function()
          start_when_stopped(tries - 1)
        end, 100)
      end
    end
    for _, buf in ipairs(buffers) do
      if vim.api.nvim_buf_is_valid(buf) then
        M.attach(buf)
      end
    end
    if #buffers == 0 then
      M.attach(vim.api.nvim_get_current_buf())
    end
  end
  start_when_stopped(50)
end

return M

-- User commands of the mplp-lsp plugin; the module loads on first use.
if vim.g.loaded_mplp then
  return
end
vim.g.loaded_mplp = true

local function command(name, method, desc)
  vim.api.nvim_create_user_command(name, function()
    require('mplp')[method]()
  end, { desc = desc })
end

command('MplpStatus', 'show_status', 'mplp-lsp: what the daemon recorded, per workspace folder')
command('MplpDrift', 'scan_drift', 'mplp-lsp: scan the workspace for drift now')
command('MplpRestart', 'restart', 'mplp-lsp: restart the language server')
command('MplpHooksInstall', 'install_hooks', 'mplp-lsp: install the Git hooks in the workspace')
command('MplpDashboard', 'open_dashboard', 'mplp-lsp: open the workspace dashboard in the browser')
vim.api.nvim_create_user_command('MplpInstall', function(args)
  require('mplp.install').install(args.args, { python = require('mplp').options.install_python })
end, {
  nargs = '?',
  complete = 'file',
  desc = 'mplp-lsp: install it (from PyPI, or a local folder or wheel) into its own environment',
})

vim.api.nvim_create_autocmd('LspProgress', {
  group = vim.api.nvim_create_augroup('mplp.progress', {}),
  callback = function(args)
    local client = vim.lsp.get_client_by_id(args.data.client_id)
    if client and client.name == 'mplp' then
      require('mplp').on_progress(args.data.params, client.id)
    end
  end,
})

-- A quick fix (a drift resolution) may have rewritten files on disk: reload the buffers that
-- did not change in Neovim ('autoread'), and ask about the others.
vim.api.nvim_create_autocmd('LspRequest', {
  group = vim.api.nvim_create_augroup('mplp.checktime', {}),
  callback = function(args)
    local request = args.data.request
    local client = vim.lsp.get_client_by_id(args.data.client_id)
    if client and client.name == 'mplp' and request.type == 'complete' and request.method == 'workspace/executeCommand' then
      vim.schedule(function()
        vim.cmd.checktime()
      end)
    end
  end,
})

-- mplp-lsp for Neovim 0.11+: `vim.lsp.enable('mplp')` starts it for files of every type in a
-- workspace (the Git work tree, else Neovim's working directory). Override any field with
-- `vim.lsp.config('mplp', {...})` or `require('mplp').setup`.
---@type vim.lsp.Config
return {
  -- The :MplpInstall environment when there is one, else `mplp-lsp serve` from the PATH.
  cmd = require('mplp').default_cmd(),
  -- Started from a folder outside every workspace, so that nothing in a workspace (e.g. a
  -- planted `mplp_lsp/` package) can be imported by the server's Python.
  cmd_cwd = require('mplp').server_cwd(),
  root_dir = function(bufnr, on_dir)
    local root = require('mplp').root(bufnr)
    if root then
      on_dir(root)
    end
  end,
  -- Never a server without a folder: it would record nothing.
  workspace_required = true,
  -- No `filetypes`: mplp-lsp records activity on files of every language.
  capabilities = {
    workspace = {
      -- Off by default on Linux; without it the daemon sees only what the editor saves.
      didChangeWatchedFiles = { dynamicRegistration = true },
    },
  },
  settings = { mplp = vim.empty_dict() },
  -- The server sends its own notifications only to a client that handles them (below).
  init_options = { notifications = { 'mplp/status' } },
  handlers = {
    ['mplp/status'] = function(_, result, ctx)
      require('mplp').on_status(result, ctx)
    end,
  },
  on_exit = function(code, _signal, client_id)
    require('mplp').on_exit(code, client_id)
  end,
}

-- mplp-lsp for Neovim 0.11+: `vim.lsp.enable('mplp')` starts it for files of every type in a
-- Git work tree. Override any field with `vim.lsp.config('mplp', {...})` or `require('mplp').setup`.
---@type vim.lsp.Config
return {
  cmd = { 'mplp-lsp', 'serve' },
  root_markers = { '.git' },
  -- No `filetypes`: mplp-lsp records activity on files of every language.
  capabilities = {
    workspace = {
      -- Off by default on Linux; without it the daemon sees only what the editor saves.
      didChangeWatchedFiles = { dynamicRegistration = true },
    },
  },
  settings = { mplp = vim.empty_dict() },
  handlers = {
    ['mplp/status'] = function(_, result, ctx)
      require('mplp').on_status(result, ctx)
    end,
  },
}

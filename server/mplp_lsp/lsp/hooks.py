"""``mplp.installHooks``: the editors' "install Git hooks" command, run by the server.

The server knows what the CLI would have to be told: which interpreter runs mplp-lsp (its
own), each workspace's root and the state dir it records into. So the hook it installs
hands Git activity to the very store the daemon writes, which ``mplp-lsp hooks install``
run from a terminal only does when given the same ``--state-dir``. The installing itself is
vcs/hooks.py's, unchanged.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mplp_lsp.lsp.feature import Feature, command
from mplp_lsp.lsp.server import MplpLanguageServer

INSTALL_COMMAND = "mplp.installHooks"


def install_in(root: Path, state_dir: Path) -> dict[str, Any]:
    """Install the hooks in the repository of ``root``; the outcome as JSON (never raises
    for a folder that is not a usable repository or a hooks dir that cannot be written)."""
    from mplp_lsp.engine.statedir import StatePaths
    from mplp_lsp.vcs import hooks
    from mplp_lsp.vcs.repo import GitRepo, RepoRefused

    try:
        repo = GitRepo.open(root)
    except RepoRefused as refused:
        return {"root": str(root), "error": str(refused)}
    try:
        states = hooks.install(repo, root, StatePaths(state_dir))
    except OSError as error:
        return {"root": str(root), "error": str(error)}
    finally:
        repo.close()
    return {
        "root": str(root),
        "hooks": [
            {
                "name": s.name,
                "state": s.state,
                "kind": s.describe(),
                "chained": s.chained,
                "path": str(s.path),
            }
            for s in states
        ],
    }


class HooksFeature(Feature[MplpLanguageServer]):
    @command(INSTALL_COMMAND)
    async def install_hooks(self, *_args: Any) -> list[dict[str, Any]]:
        await self.server.ready.wait()
        # Git runs as a subprocess: off the event loop.
        return [
            await asyncio.to_thread(install_in, workspace.root, workspace.paths.root)
            for workspace in self.server.workspaces or ()
        ]

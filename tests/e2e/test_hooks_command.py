"""``mplp.installHooks``: the editors' "install Git hooks", run by a real daemon."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from lsprotocol import types

from tests.e2e.harness import lsp_session, plain, read_events
from tests.support.drift import GIT_ENV

FOREIGN_HOOK = "#!/bin/sh\n# a hook of the user's own, kept and run first\nexit 0\n"


def branch(workspace: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(workspace), "symbolic-ref", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


OTHER_HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite", "pre-push")


async def test_install_hooks_command_installs_into_each_folder(
    workspace: Path, state_dir: Path, tmp_path: Path
) -> None:
    hooks_dir = workspace / ".git" / "hooks"
    hooks_dir.mkdir(parents=True, exist_ok=True)
    (hooks_dir / "reference-transaction").write_text(FOREIGN_HOOK)
    (hooks_dir / "reference-transaction").chmod(0o755)
    plain_folder = (tmp_path / "not-a-repo").resolve()
    plain_folder.mkdir()
    async with lsp_session(workspace, state_dir, folders=[workspace, plain_folder]) as session:
        result = plain(
            await session.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="mplp.installHooks", arguments=[])
            )
        )
    by_root = {entry["root"]: entry for entry in result}
    installed = by_root[str(workspace)]["hooks"]
    # This git runs reference-transaction: the other five are not needed. Only the hook
    # that existed is chained.
    assert {(h["name"], h["state"], h["chained"]) for h in installed} == {
        ("reference-transaction", "installed", True),
        *((name, "absent", False) for name in OTHER_HOOKS),
    }
    hook = (hooks_dir / "reference-transaction").read_text()
    # The hook reports into the store this daemon records into, with this interpreter.
    assert str(state_dir) in hook and str(workspace) in hook
    assert os.access(hooks_dir / "reference-transaction", os.X_OK)
    assert (hooks_dir / "reference-transaction.mplp-lsp-chained").read_text() == FOREIGN_HOOK
    assert "error" in by_root[str(plain_folder)], by_root
    # A commit now reaches the store through the hook (the daemon is gone: directly).
    (workspace / "a.txt").write_text("a\n")
    for args in (["add", "a.txt"], ["commit", "-qm", "a"]):
        git = await asyncio.create_subprocess_exec("git", "-C", str(workspace), *args, env=GIT_ENV)
        assert await git.wait() == 0
    deadline = time.monotonic() + 30
    while not read_events(state_dir, "git") and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    reported = {
        (e["payload"]["event_kind"], e["payload"]["ref_name"])
        for e in read_events(state_dir, "git")
    }
    assert ("commit", "refs/heads/" + branch(workspace)) in reported, reported

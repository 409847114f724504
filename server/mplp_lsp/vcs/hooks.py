"""Installing the git hook that reports ref updates the moment they happen.

One hook does it: ``reference-transaction`` (git ≥ 2.28) sees every ref update with its old
and new value — commits, merges, rebases, tags, branch creation and deletion, and the
remote-tracking update of a successful push. (``post-commit``, ``post-merge``,
``post-rewrite`` and ``post-checkout`` would report subsets of the same updates; ``pre-push``
runs before the push and cannot know whether it succeeds.)

The hook chains: a hook already in place is renamed ``<name>.mplp-lsp-chained`` and run
first, with the same arguments and input; its exit status is the hook's exit status, so it
can still veto a transaction. Ours then runs only for ``committed`` transactions, detached
in the background with its output discarded, so git never waits for it; nothing of the
repository (URLs, credentials) is passed in argv — the hook process reads the refs itself.
``uninstall`` renames the chained hook back, byte for byte. The hooks directory is git's
own answer (``git rev-parse --git-path hooks``), so ``core.hooksPath`` is respected.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from mplp_lsp.vcs.repo import LOCATION_VARIABLES, GitRepo

HOOK_NAMES = ("reference-transaction",)
MARKER = "# mplp-lsp-hook"
CHAINED_SUFFIX = ".mplp-lsp-chained"

_TEMPLATE = """#!/bin/sh
{marker} ({name}): reports Git activity to mplp-lsp, then gets out of the way.
# `mplp-lsp hooks uninstall` removes it and puts back the hook it chains to, if any.
chained={chained}
if [ "$1" != committed ] && [ ! -x "$chained" ]; then exit 0; fi
spool=$(mktemp 2>/dev/null) || spool=/dev/null
cat > "$spool"
status=0
if [ -x "$chained" ]; then
    "$chained" "$@" < "$spool"
    status=$?
fi
if [ "$1" = committed ] && [ "$spool" != /dev/null ]; then
    (
        unset {location}
        {command} < "$spool"
        rm -f "$spool"
    ) < /dev/null > /dev/null 2>&1 &
elif [ "$spool" != /dev/null ]; then
    rm -f "$spool"
fi
exit $status
"""


@dataclass(frozen=True, slots=True)
class HookState:
    name: str
    path: Path
    state: str  # "installed", "absent", "foreign" (someone else's hook, not chained yet)
    chained: bool


def hooks_dir(repo: GitRepo) -> Path:
    raw = repo.run("rev-parse", "--git-path", "hooks").strip()
    path = Path(raw)
    return path if path.is_absolute() else repo.info.worktree / path


def _is_ours(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return MARKER.encode() in handle.read(512)
    except OSError:
        return False


def status(repo: GitRepo) -> list[HookState]:
    directory = hooks_dir(repo)
    out = []
    for name in HOOK_NAMES:
        path = directory / name
        chained = os.path.lexists(str(path) + CHAINED_SUFFIX)
        if _is_ours(path):
            state = "installed"
        elif os.path.lexists(path):
            state = "foreign"
        else:
            state = "absent"
        out.append(HookState(name, path, state, chained))
    return out


def install(repo: GitRepo, workspace: Path, state_dir: str | None) -> list[HookState]:
    directory = hooks_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    for name in HOOK_NAMES:
        path = directory / name
        chained = Path(str(path) + CHAINED_SUFFIX)
        if os.path.lexists(path) and not _is_ours(path):
            if os.path.lexists(chained):
                raise FileExistsError(f"{chained} exists already; move it away first")
            path.rename(chained)  # keeps the user's hook exactly: bytes, mode, symlink
        command = [sys.executable, "-m", "mplp_lsp", "emit", "git", "--hook", name]
        command += ["--workspace", str(workspace)]
        if state_dir:
            command += ["--state-dir", str(state_dir)]
        script = _TEMPLATE.format(
            marker=MARKER,
            name=name,
            chained=shlex.quote(str(chained)),
            location=" ".join(LOCATION_VARIABLES),
            command=shlex.join(command),
        )
        temporary = path.with_name(f".{name}.mplp-lsp.tmp")
        temporary.write_text(script, encoding="utf-8")
        temporary.chmod(0o755)
        temporary.replace(path)
    return status(repo)


def uninstall(repo: GitRepo) -> list[HookState]:
    directory = hooks_dir(repo)
    for name in HOOK_NAMES:
        path = directory / name
        if not _is_ours(path):
            continue
        path.unlink()
        chained = Path(str(path) + CHAINED_SUFFIX)
        if os.path.lexists(chained):
            chained.rename(path)
    return status(repo)

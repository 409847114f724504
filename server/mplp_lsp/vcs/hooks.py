"""Installing the git hooks that report activity the moment it happens.

Six hooks, each reporting what it knows (see :mod:`mplp_lsp.vcs.hook_updates`):
``reference-transaction`` (git ≥ 2.28) sees every ref update with its old and new value;
``post-commit``, ``post-merge``, ``post-rewrite`` and ``post-checkout`` vouch for the move of
the checked-out branch they were run for, which is what an older git, or a transaction hook
that someone else's hook vetoed, leaves to them; ``pre-push`` cannot know whether the push
will succeed, so it only leaves a background check behind that waits for the push to end and
reports the remote-tracking refs it updated. Deriving the same operation twice is harmless:
the intake keeps one (git events are deduplicated by operation: :mod:`mplp_lsp.store.dedup`).

Each hook chains: a hook already in place is renamed ``<name>.mplp-lsp-chained`` and run
first, with the same arguments and input; its exit status is the hook's exit status, so it
can still veto a transaction or a push. Ours then runs detached in the background with its
output discarded, so git never waits for it; nothing of the repository (URLs, credentials)
is passed in argv — ``pre-push``'s remote URL argument is not handed on, and the hook process
reads the refs itself. ``uninstall`` renames the chained hook back, byte for byte. The hooks
directory is git's own answer (``git rev-parse --git-path hooks``), so ``core.hooksPath`` is
respected.

Nothing of the repository is imported: git runs hooks in the worktree, and ``python -m`` would
put that directory first on ``sys.path``, so a tracked ``mplp_lsp/__main__.py`` (or a
``sitecustomize.py``) in a branch checked out for review would run. Ours starts Python in
isolated mode (``-I``: no current directory or script directory on the path, no ``PYTHON*``
variables, no user site) from ``/``. The script carries its format number; ``status``
reports an older one as "outdated", and ``install`` rewrites it.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from mplp_lsp.vcs.hook_names import HOOK_NAMES
from mplp_lsp.vcs.repo import LOCATION_VARIABLES, GitRepo

MARKER = "# mplp-lsp-hook"
CHAINED_SUFFIX = ".mplp-lsp-chained"
# Raise whenever the script changes: installed hooks of an older format are "outdated".
# (Format 1, before the number was written, imported from the worktree.)
FORMAT = 2
_FORMAT_PREFIX = f"{MARKER}-format: "

_HEADER = """#!/bin/sh
{marker} ({name}): reports Git activity to mplp-lsp, then gets out of the way.
{format_line}
# `mplp-lsp hooks uninstall` removes it and puts back the hook it chains to, if any.
chained={chained}
spool=
"""
# Hooks given input on stdin keep it in a private temporary file, read by both parties.
_SPOOL = """spool=$(mktemp 2>/dev/null) || spool=
if [ -n "$spool" ]; then cat > "$spool"; exec < "$spool"; fi
"""
# ``reference-transaction`` notes the refs as they are while git still runs (one git process),
# with the phase and git's pid: our part runs later, when the next commands of a script may
# have moved or deleted them. A deletion's old value is often not given (``git branch -D``):
# in the ``prepared`` phase the ref still exists, so that phase is reported too, and only then.
_DELETES = 'grep -q "^0\\{40\\} 0\\{40\\} refs/heads/" "$spool"'
_TIPS = """    { echo "phase $1 $PPID"
      git for-each-ref --format='tip %(objectname) %(refname) %(HEAD)' \\
          refs/heads refs/tags refs/remotes; } >> "$spool" 2>/dev/null
"""
# Hooks told nothing exact note the checked-out ref and commit now (one git process): our
# part runs later, when HEAD may have moved on.
_CAPTURE = """if {when}; then
    spool=$(mktemp 2>/dev/null) || spool=
    if [ -n "$spool" ]; then git rev-parse HEAD --symbolic-full-name HEAD > "$spool" 2>/dev/null; fi
fi
"""
_BODY = """status=0
if [ -x "$chained" ]; then
    "$chained" "$@"
    status=$?
fi
if {when} && [ -n "$spool" ]; then
{capture}    (
        unset {location}
        cd / || exit 0
        {command} < "${{spool:-/dev/null}}"
        [ -z "$spool" ] || rm -f "$spool"
    ) < /dev/null > /dev/null 2>&1 &
elif [ -n "$spool" ]; then
    rm -f "$spool"
fi
exit $status
"""


@dataclass(frozen=True, slots=True)
class _Shape:
    reads_input: bool  # False: the spool holds the HEAD captured when the hook ran
    when: str  # shell condition for our part to run
    extra: str = ""  # shell words appended to our command
    early: str = ""  # a line that ends the hook before anything is spooled
    capture: str = ""  # lines run while git waits, after the chained hook, to add to the spool


_SHAPES = {
    "reference-transaction": _Shape(
        True,
        f'{{ [ "$1" = committed ] || {{ [ "$1" = prepared ] && {_DELETES}; }}; }}',
        early='case "$1" in committed|prepared) ;; *) [ -x "$chained" ] || exit 0 ;; esac\n',
        capture=_TIPS,
    ),
    "post-commit": _Shape(False, "true"),
    "post-merge": _Shape(False, "true"),
    "post-checkout": _Shape(False, '[ "$3" = 1 ]'),  # a branch checkout, not of files
    "post-rewrite": _Shape(False, "true"),
    # Only if the push goes ahead; the check waits for this git process to exit first.
    "pre-push": _Shape(True, '[ "$status" = 0 ]', ' --wait-pid "$PPID"'),
}


def hook_script(name: str, chained: Path, command: list[str]) -> str:
    shape = _SHAPES[name]
    header = _HEADER.format(
        marker=MARKER,
        name=name,
        format_line=f"{_FORMAT_PREFIX}{FORMAT}",
        chained=shlex.quote(str(chained)),
    )
    body = _BODY.format(
        when=shape.when,
        location=" ".join(LOCATION_VARIABLES),
        command=shlex.join(command) + shape.extra,
        capture=shape.capture,
    )
    spool = _SPOOL if shape.reads_input else _CAPTURE.format(when=shape.when)
    return header + shape.early + spool + body


@dataclass(frozen=True, slots=True)
class HookState:
    name: str
    path: Path
    # "installed", "outdated" (ours, an older format: `install` rewrites it), "absent",
    # "foreign" (someone else's hook, not chained yet)
    state: str
    chained: bool


def hooks_dir(repo: GitRepo) -> Path:
    raw = repo.run("rev-parse", "--git-path", "hooks").strip()
    path = Path(raw)
    return path if path.is_absolute() else repo.info.worktree / path


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(512)
    except OSError:
        return b""


def _is_ours(path: Path) -> bool:
    return MARKER.encode() in _head(path)


def _format_of(head: bytes) -> int:
    """The format number an installed hook of ours declares; 1 when it names none."""
    for line in head.decode("utf-8", "replace").splitlines():
        if line.startswith(_FORMAT_PREFIX):
            number = line.removeprefix(_FORMAT_PREFIX).strip()
            return int(number) if number.isdigit() else 1
    return 1


def status(repo: GitRepo) -> list[HookState]:
    directory = hooks_dir(repo)
    out = []
    for name in HOOK_NAMES:
        path = directory / name
        chained = os.path.lexists(str(path) + CHAINED_SUFFIX)
        head = _head(path)
        if MARKER.encode() in head:
            state = "installed" if _format_of(head) == FORMAT else "outdated"
        elif os.path.lexists(path):
            state = "foreign"
        else:
            state = "absent"
        out.append(HookState(name, path, state, chained))
    return out


def install(repo: GitRepo, workspace: Path, state_dir: str | None) -> list[HookState]:
    directory = hooks_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    for name in HOOK_NAMES:  # refuse before changing anything, not half way through
        path = directory / name
        chained = Path(str(path) + CHAINED_SUFFIX)
        if os.path.lexists(path) and not _is_ours(path) and os.path.lexists(chained):
            raise FileExistsError(f"{chained} exists already; move it away first")
    for name in HOOK_NAMES:
        path = directory / name
        chained = Path(str(path) + CHAINED_SUFFIX)
        if os.path.lexists(path) and not _is_ours(path):
            path.rename(chained)  # keeps the user's hook exactly: bytes, mode, symlink
        # -I and the `cd /` of the script: nothing of the worktree is importable.
        command = [sys.executable, "-I", "-m", "mplp_lsp", "emit", "git", "--hook", name]
        command += ["--workspace", str(workspace.absolute())]
        if state_dir:
            command += ["--state-dir", str(Path(state_dir).absolute())]
        script = hook_script(name, chained, command)
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

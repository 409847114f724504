"""Installing the git hooks that record Git activity the moment it happens, at shell speed.

Git waits for its hooks, so ours do nothing on Git's path but shell builtins: no Python, no
git, no other program. Each appends what Git tells it (the hook's name and arguments, the
ref updates on its standard input, the git process) to the spool in the state dir as one
line, in one write (:mod:`mplp_lsp.vcs.spool_records`); the events are made from the spool
later, off Git's path, by whoever owns the store: the daemon, or else a background ingester
the hook starts when none runs (``mplp-lsp hooks ingest``, at most one at a time).

``reference-transaction`` (git 2.28+) reports every ref update with its old and new value,
in Git's order: that is all the daemon needs (:mod:`mplp_lsp.vcs.replay`). With an older git
it is never run, and the five hooks that report less (``post-commit``, ``post-merge``,
``post-checkout``, ``post-rewrite``, ``pre-push``) are installed instead of nothing.

Each hook chains: a hook already in place is renamed ``<name>.mplp-lsp-chained`` and run
first, with the same arguments and input; its exit status is the hook's, so it can still
veto a transaction or a push. ``uninstall`` renames it back, byte for byte. The hooks
directory is git's own answer (``git rev-parse --git-path hooks``), so ``core.hooksPath`` is
respected.

Safety: values are baked into the script quoted (``shlex.quote``) and Git's input is only
ever data (``read -r``, ``printf '%s'``), so no ref name can run anything; the script
changes to ``/`` before anything of ours runs; the ingester is Python in isolated mode
(``-I``: no current or script directory on its path, no ``PYTHON*`` variables), started
by its absolute path. The script carries its format number; ``status`` names the kind of
each installed hook and reports an older format as "outdated", which ``install`` rewrites.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.vcs.hook_names import FALLBACK_HOOKS, HOOK_NAMES, TRANSACTION_HOOK
from mplp_lsp.vcs.refs import read_snapshot
from mplp_lsp.vcs.replay import baseline_lines
from mplp_lsp.vcs.repo import LOCATION_VARIABLES, GitRepo
from mplp_lsp.vcs.spool import LOG, MARKER, Spool
from mplp_lsp.vcs.spool_records import (
    BASELINE,
    FILE_TAG,
    INLINE_LIMIT,
    RECORD_TAG,
    SIDE_PREFIX,
    VERSION,
    HookRecord,
)

MARKER_LINE = "# mplp-lsp-hook"
CHAINED_SUFFIX = ".mplp-lsp-chained"
# Raise whenever the script changes: installed hooks of an older format are "outdated".
FORMAT = 3
KINDS = {
    1: "starts Python on every Git command, with the worktree on its path",
    2: "starts Python on every Git command",
    3: "shell builtins only; records to the spool",
}
_FORMAT_PREFIX = f"{MARKER_LINE}-format: "
TRANSACTION_SINCE = (2, 28)  # the git version that runs reference-transaction

_HEADER = """#!/bin/sh
{marker} ({name}): records what Git reports for mplp-lsp, then gets out of the way.
{format_line}
# Git waits for shell builtins only: the record is appended to mplp-lsp's spool in one
# write and turned into events later, off Git's path (by the daemon, or by one background
# ingester started here when none runs). `mplp-lsp hooks uninstall` removes this hook and
# puts back the hook it chains to, if any.
chained={chained}
spool={spool}
top={top}
"""
# Git's input: kept whole for the chained hook, and as tab-joined lines for the record
# (a ref name holds no tab). ``keep`` is a case pattern: the lines worth recording.
_READ = """raw=
input=
while IFS= read -r line || [ -n "$line" ]; do
    raw="$raw$line
"
    case $line in
    {keep}) input="$input	$line" ;;
    esac
done
"""
_CHAINED_WITH_INPUT = """status=0
if [ -x "$chained" ]; then
    printf '%s' "$raw" | "$chained" "$@"
    status=$?
fi
"""
_CHAINED = """status=0
if [ -x "$chained" ]; then
    "$chained" "$@"
    status=$?
fi
"""
# The checked-out ref and its commit as they are now (git will not wait for our part, and the
# next command may move them): read from the git dir with ``read``, no git process.
_HEAD = """gitdir=${GIT_DIR:-.git}
[ -f "$gitdir" ] && { read -r gitdir < "$gitdir"; gitdir=${gitdir#gitdir: }; }
head=
read -r head < "$gitdir/HEAD" 2>/dev/null
case $head in
"ref: "*)
    ref=${head#ref: }
    common=$gitdir
    if [ -f "$gitdir/commondir" ]; then
        read -r common < "$gitdir/commondir"
        case $common in /*) ;; *) common=$gitdir/$common ;; esac
    fi
    value=
    read -r value < "$common/$ref" 2>/dev/null
    ;;
*) ref=HEAD value=$head ;;
esac
"""
_RECORD = """cd -P . 2>/dev/null
here=0
[ "$PWD" = "$top" ] && here=1
cd / || exit "$status"
umask 077
LC_ALL=C
record="{tag} {version} {name} $PPID $here{args}$input"
if [ "${{#record}}" -lt {limit} ]; then
    printf '%s\\n' "$record" >> "$spool/{log}" 2>/dev/null || exit "$status"
else
    set -C
    n=0
    until {{ printf '%s\\n' "$record" > "$spool/{side}$$.$n"; }} 2>/dev/null; do
        n=$((n + 1))
        [ "$n" -lt 100 ] || exit "$status"
    done
    set +C
    printf '{file_tag} {side}%s.%s\\n' "$$" "$n" >> "$spool/{log}" 2>/dev/null || exit "$status"
fi
ingest() {{
    (
        unset {location}
        exec {command}
    ) </dev/null >/dev/null 2>&1 &
    printf '%s\\n' "$!" >| "$spool/{marker}"
}}
set -C
if {{ true > "$spool/{marker}"; }} 2>/dev/null; then
    ingest
else
    owner=
    read -r owner < "$spool/{marker}" 2>/dev/null
    case $owner in
    '') ;;
    *[!0-9]*) ingest ;;
    *) kill -0 "$owner" 2>/dev/null || ingest ;;
    esac
fi
exit "$status"
"""
_HAND_OVER = '[ -x "$chained" ] && exec "$chained" "$@"; exit 0'


@dataclass(frozen=True, slots=True)
class _Shape:
    gate: str = ""  # first: hands over to the chained hook when there is nothing to record
    keep: str = ""  # case pattern of the input lines recorded ("": no input is read)
    args: str = ""  # the arguments recorded, expanded inside the record's double quotes
    vetoable: bool = False  # record only when the chained hook lets git go ahead
    head: bool = False  # record HEAD's ref and commit as the last two arguments


# Watched refs: "<old> <new> HEAD" and the refs/heads, refs/tags and refs/remotes namespaces.
_WATCHED_LINES = '*" HEAD"|*" refs/heads/"*|*" refs/tags/"*|*" refs/remotes/"*'
_SHAPES = {
    TRANSACTION_HOOK: _Shape(
        gate=f"case $1 in\ncommitted) ;;\n*) {_HAND_OVER} ;;\nesac\n", keep=_WATCHED_LINES
    ),
    "post-commit": _Shape(head=True),
    "post-merge": _Shape(args=" $1", head=True),
    # A branch checkout ($3 = 1), not one of files.
    "post-checkout": _Shape(
        gate=f'[ "$3" = 1 ] || {{ {_HAND_OVER}; }}\n', args=" $1 $2 $3", head=True
    ),
    "post-rewrite": _Shape(args=" $1", head=True),
    # Its remote URL argument ($2) may hold credentials: not recorded.
    "pre-push": _Shape(keep="*", vetoable=True),
}


def hook_script(name: str, chained: Path, spool: Path, top: Path, command: list[str]) -> str:
    shape = _SHAPES[name]
    script = _HEADER.format(
        marker=MARKER_LINE,
        name=name,
        format_line=f"{_FORMAT_PREFIX}{FORMAT}",
        chained=shlex.quote(str(chained)),
        spool=shlex.quote(str(spool)),
        top=shlex.quote(str(top)),
    )
    script += shape.gate
    if shape.keep:
        script += _READ.format(keep=shape.keep) + _CHAINED_WITH_INPUT
        script += '[ -n "$input" ] || exit "$status"\n'
    else:
        script += "input=\n" + _CHAINED
    if shape.vetoable:
        script += '[ "$status" = 0 ] || exit "$status"\n'
    args = shape.args
    if shape.head:
        script += _HEAD
        args += " ${value:--} ${ref:--}"
    return script + _RECORD.format(
        tag=RECORD_TAG,
        version=VERSION,
        name=name,
        args=args,
        limit=INLINE_LIMIT,
        log=LOG,
        side=SIDE_PREFIX,
        file_tag=FILE_TAG,
        marker=MARKER,
        location=" ".join(LOCATION_VARIABLES),
        command=shlex.join(command),
    )


@dataclass(frozen=True, slots=True)
class HookState:
    name: str
    path: Path
    # "installed", "outdated" (ours, an older format: `install` rewrites or removes it),
    # "absent", "foreign" (someone else's hook, not chained yet)
    state: str
    chained: bool
    needed: bool  # installed by `install` with this git
    format: int | None  # ours: the format it declares

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": str(self.path),
            "state": self.state,
            "chained": self.chained,
            "needed": self.needed,
            "format": self.format,
            "kind": KINDS.get(self.format) if self.format is not None else None,
        }

    def describe(self) -> str:
        """``state``, with the kind of hook it is (or why it is not needed)."""
        if self.format is not None:
            kind = KINDS.get(self.format, "an unknown format")
            return f"{self.state} (format {self.format}: {kind})"
        if self.state == "absent" and not self.needed:
            return "absent (not needed: git runs reference-transaction for every ref update)"
        return self.state


def hooks_dir(repo: GitRepo) -> Path:
    raw = repo.run("rev-parse", "--git-path", "hooks").strip()
    path = Path(raw)
    return path if path.is_absolute() else repo.info.worktree / path


def git_version(repo: GitRepo) -> tuple[int, ...]:
    found = re.search(r"(\d+)\.(\d+)", repo.run("version"))
    return (int(found[1]), int(found[2])) if found else (0, 0)


def needed_hooks(repo: GitRepo) -> tuple[str, ...]:
    """The hooks ``install`` writes for this repository's git."""
    if git_version(repo) >= TRANSACTION_SINCE:
        return (TRANSACTION_HOOK,)
    return (TRANSACTION_HOOK, *FALLBACK_HOOKS)


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(512)
    except OSError:
        return b""


def is_ours(path: Path) -> bool:
    return MARKER_LINE.encode() in _head(path)


def _format_of(head: bytes) -> int:
    """The format number an installed hook of ours declares; 1 when it names none."""
    for line in head.decode("utf-8", "replace").splitlines():
        if line.startswith(_FORMAT_PREFIX):
            number = line.removeprefix(_FORMAT_PREFIX).strip()
            return int(number) if number.isdigit() else 1
    return 1


def outdated(directory: Path) -> list[str]:
    """The hooks of ours in ``directory`` written by an older mplp-lsp."""
    return [
        name
        for name in HOOK_NAMES
        if MARKER_LINE.encode() in (head := _head(directory / name)) and _format_of(head) < FORMAT
    ]


def status(repo: GitRepo, needed: tuple[str, ...] | None = None) -> list[HookState]:
    directory = hooks_dir(repo)
    wanted = needed_hooks(repo) if needed is None else needed
    out = []
    for name in HOOK_NAMES:
        path = directory / name
        chained = os.path.lexists(str(path) + CHAINED_SUFFIX)
        head = _head(path)
        form = None
        if MARKER_LINE.encode() in head:
            form = _format_of(head)
            state = "installed" if form == FORMAT and name in wanted else "outdated"
        elif os.path.lexists(path):
            state = "foreign"
        else:
            state = "absent"
        out.append(HookState(name, path, state, chained, name in wanted, form))
    return out


def install(
    repo: GitRepo, workspace: Path, paths: StatePaths, *, needed: tuple[str, ...] | None = None
) -> list[HookState]:
    """Write the hooks this git needs (``needed``: these instead), recording into the spool
    of the state dir ``paths``; hooks of ours this git does not need are removed."""
    wanted = needed_hooks(repo) if needed is None else needed
    directory = hooks_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    for name in wanted:  # refuse before changing anything, not half way through
        path = directory / name
        chained = Path(str(path) + CHAINED_SUFFIX)
        if os.path.lexists(path) and not is_ours(path) and os.path.lexists(chained):
            raise FileExistsError(f"{chained} exists already; move it away first")
    paths.git_spool.mkdir(mode=0o700, parents=True, exist_ok=True)  # no hook can make it
    # -I and the `cd /` of the script: nothing of the worktree is importable.
    command = [sys.executable, "-I", "-m", "mplp_lsp", "hooks", "ingest"]
    command += ["--workspace", str(workspace.absolute()), "--state-dir", str(paths.root)]
    for name in HOOK_NAMES:
        path = directory / name
        chained = Path(str(path) + CHAINED_SUFFIX)
        if name not in wanted:
            if is_ours(path):
                _remove(path, chained)
            continue
        if os.path.lexists(path) and not is_ours(path):
            path.rename(chained)  # keeps the user's hook exactly: bytes, mode, symlink
        script = hook_script(name, chained, paths.git_spool, repo.info.worktree, command)
        temporary = path.with_name(f".{name}.mplp-lsp.tmp")
        temporary.write_text(script, encoding="utf-8")
        temporary.chmod(0o755)
        temporary.replace(path)
    # The refs as they are now: what the records from here on move (vcs/replay.py).
    now = read_snapshot(repo.info.git_dir, repo.info.common_dir)
    baseline = HookRecord(BASELINE, os.getpid(), True, (), baseline_lines(now.refs))
    Spool(paths.git_spool).append(baseline)
    return status(repo, wanted)


def uninstall(repo: GitRepo) -> list[HookState]:
    directory = hooks_dir(repo)
    for name in HOOK_NAMES:
        path = directory / name
        if is_ours(path):
            _remove(path, Path(str(path) + CHAINED_SUFFIX))
    return status(repo)


def _remove(path: Path, chained: Path) -> None:
    path.unlink()
    if os.path.lexists(chained):
        chained.rename(path)

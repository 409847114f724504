"""The body of ``mplp-lsp emit git --hook NAME``.

It runs in the background of a git command (the hook script detaches it), works out the ref
updates the hook can vouch for (:mod:`mplp_lsp.vcs.hook_updates`) and turns them into
git_events with the same rules and the same enrichment as the daemon's poller, so whichever
reports first wins and the others are duplicates. It never fails the git command: problems
are logged to the state dir's error log.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from mplp_lsp.cli.emit import hook_environment
from mplp_lsp.cli.store_access import open_read_only, state_paths
from mplp_lsp.handoff import deliver
from mplp_lsp.intake import Submission
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.settings import EmailPolicy
from mplp_lsp.sources.git import (
    EMAIL_POLICY_KEY,
    SOURCE_MODULE,
    advance_refs,
    as_current,
    load_refs,
    message_lookup,
)
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs.hook_updates import hook_updates, observed, parse_lines
from mplp_lsp.vcs.operations import git_events
from mplp_lsp.vcs.refs import read_snapshot
from mplp_lsp.vcs.repo import GitRepo, RepoRefused

log = logging.getLogger(__name__)
_POLICIES: tuple[EmailPolicy, ...] = ("keep", "hash", "drop")
WAIT_LIMIT = 15 * 60.0  # seconds a pre-push waits for its push to end
_WAIT_STEP = 0.05


def run_hook(
    root: Path, state_dir: str | None, name: str, stdin: str, *, wait_pid: int | None = None
) -> int:
    hook_environment()
    lines = stdin.splitlines()
    if name == "reference-transaction" and not parse_lines(lines):
        return 0  # no watched ref in this transaction: not even the repository is opened
    if wait_pid is not None:
        wait_for_exit(wait_pid, WAIT_LIMIT)
    try:
        repo = GitRepo.open(root)
    except RepoRefused as refused:
        log.warning("mplp-lsp hook: %s", refused)
        return 0
    try:
        recorded, policy = _recorded(root, state_dir)
        current = read_snapshot(repo.info.git_dir, repo.info.common_dir)
        # A move another hook (or the poller) reported already gives the same payloads,
        # which the intake drops: no need to ask the recorded state, which may lag.
        raw = observed(name, lines, repo.info, current)
        if recorded is not None:
            recorded = as_current(recorded, current.refs)
        updates, known = hook_updates(raw, current, recorded)
        payloads = git_events(repo, updates, known, message_lookup(repo), email_policy=policy)
    finally:
        repo.close()
    if updates:
        submissions = [Submission(Kind.GIT, p, SOURCE_MODULE) for p in payloads]
        deliver(
            root,
            state_dir,
            submissions,
            also=lambda conn: advance_refs(conn, updates, current),
        )
    return 0


def wait_for_exit(pid: int, limit: float) -> bool:
    """Wait until process ``pid`` (not our child: the ``git push`` running the hook) is gone;
    False if it still runs after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # it exists, owned by someone else
        time.sleep(_WAIT_STEP)
    return False


def _recorded(root: Path, state_dir: str | None) -> tuple[dict[str, str] | None, EmailPolicy]:
    """The ref state the store recorded (None: none yet) and the author email policy."""
    conn = open_read_only(state_paths(root, state_dir))
    if conn is None:
        return None, "hash"
    try:
        refs = load_refs(conn)
        policy = EventLog(conn).get_meta(EMAIL_POLICY_KEY)
    except Exception:  # an older store without the git tables
        return None, "hash"
    finally:
        conn.close()
    return refs, next((p for p in _POLICIES if p == policy), "hash")

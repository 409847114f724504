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
from mplp_lsp.settings import EmailPolicy, Settings
from mplp_lsp.sources.git import EMAIL_POLICY_KEY, SOURCE_MODULE, advance_refs, message_lookup
from mplp_lsp.statedir import StateDirLock
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs.hook_updates import hook_updates, observed, parse_transaction
from mplp_lsp.vcs.operations import git_events
from mplp_lsp.vcs.refs import read_snapshot
from mplp_lsp.vcs.repo import GitRepo, RepoRefused

log = logging.getLogger(__name__)
_POLICIES: tuple[EmailPolicy, ...] = ("keep", "hash", "drop")
WAIT_LIMIT = 15 * 60.0  # seconds a pre-push waits for its push to end
_WAIT_STEP = 0.05


def run_hook(
    root: Path, settings: Settings, name: str, stdin: str, *, wait_pid: int | None = None
) -> int:
    """Report what the hook saw with ``settings`` (resolved now, at hook time: a settings
    file changed a moment ago counts)."""
    hook_environment()
    lines = stdin.splitlines()
    transaction = parse_transaction(lines) if name == "reference-transaction" else None
    if transaction is not None:
        if not (transaction.reported() or transaction.deletions()):
            return 0  # no watched ref in this transaction: not even the repository is opened
        if transaction.deletions():
            wait_pid = transaction.git_pid  # whether the deletion happened shows after git
    if wait_pid is not None:
        wait_for_exit(wait_pid, WAIT_LIMIT)
    try:
        repo = GitRepo.open(root)
    except RepoRefused as refused:
        log.warning("mplp-lsp hook: %s", refused)
        return 0
    try:
        policy = _email_policy(root, settings)
        now = read_snapshot(repo.info.git_dir, repo.info.common_dir)
        if transaction is None:
            raw, current = observed(name, lines, repo.info, now), now
        elif transaction.phase == "prepared":
            # Still at its old value: the transaction was aborted, nothing was deleted.
            raw = [d for d in transaction.deletions() if now.refs.get(d.ref) != d.old]
            current = now
        else:
            raw, current = transaction.reported(), transaction.refs or now
        updates, known = hook_updates(raw, current)
        payloads = git_events(repo, updates, known, message_lookup(repo), email_policy=policy)
    finally:
        repo.close()
    if updates:
        submissions = [Submission(Kind.GIT, p, SOURCE_MODULE) for p in payloads]
        deliver(
            root,
            None,
            submissions,
            also=lambda conn: advance_refs(conn, updates, current),
            settings=settings,
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


def _email_policy(root: Path, settings: Settings) -> EmailPolicy:
    """The running daemon's policy, so that its poller and this hook report a commit alike
    (it records its policy at start and at each change); with no daemon, the settings."""
    paths = state_paths(root, settings.state_dir)
    if StateDirLock(paths.lock, workspace=root).owner() is None:
        return settings.git_author_email
    conn = open_read_only(paths)
    if conn is None:
        return settings.git_author_email
    try:
        policy = EventLog(conn).get_meta(EMAIL_POLICY_KEY)
    except Exception:  # an older store without the meta table
        return settings.git_author_email
    finally:
        conn.close()
    return next((p for p in _POLICIES if p == policy), settings.git_author_email)

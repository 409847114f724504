"""The body of ``mplp-lsp emit git --hook reference-transaction``.

It runs in the background of a git command (the hook script detaches it), reads the ref
updates git reported, and turns them into git_events with the same rules and the same
enrichment as the daemon's poller, so whichever reports first wins and the other is a
duplicate. It never fails the git command: problems are logged to the state dir's error log.
"""

from __future__ import annotations

import logging
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
    load_refs,
    message_lookup,
)
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs.hook_updates import hook_updates, parse_lines
from mplp_lsp.vcs.operations import git_events
from mplp_lsp.vcs.refs import read_snapshot
from mplp_lsp.vcs.repo import GitRepo, RepoRefused

log = logging.getLogger(__name__)
_POLICIES: tuple[EmailPolicy, ...] = ("keep", "hash", "drop")


def run_hook(root: Path, state_dir: str | None, stdin: str) -> int:
    hook_environment()
    raw = parse_lines(stdin.splitlines())
    if not raw:
        return 0
    try:
        repo = GitRepo.open(root)
    except RepoRefused as refused:
        log.warning("mplp-lsp hook: %s", refused)
        return 0
    try:
        recorded, policy = _recorded(root, state_dir)
        current = read_snapshot(repo.info.git_dir, repo.info.common_dir)
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
            also=lambda conn: advance_refs(conn, updates, current.refs),
        )
    return 0


def _recorded(root: Path, state_dir: str | None) -> tuple[dict[str, str], EmailPolicy]:
    """What the daemon recorded (for deleted refs) and its author email policy."""
    conn = open_read_only(state_paths(root, state_dir))
    if conn is None:
        return {}, "hash"
    try:
        refs = load_refs(conn) or {}
        policy = EventLog(conn).get_meta(EMAIL_POLICY_KEY)
    except Exception:  # an older store without the git tables
        return {}, "hash"
    finally:
        conn.close()
    return refs, next((p for p in _POLICIES if p == policy), "hash")

"""The recorded HEAD and branch for repository drift, taken from what the Git source keeps.

The branch is the one HEAD pointed to when the Git source last recorded the refs (meta
``git.head``); its commit is what the PSG says about that branch (``psg_branches``, moved by
the git_events the daemon reported), or the recorded ref (``git_refs``) for a branch the PSG
has no node for (it predates the baseline). So a commit, merge, checkout or branch switch
the daemon recorded is no drift; a mismatch is: the repository moved in a way no event
reported (``reset``, ``branch -f``), or while nobody recorded it (the daemon stopped and no
hook installed, before catch-up ran). Until the Git source recorded anything (a repository
it refuses, say) the ``meta`` record stands in.
"""

from __future__ import annotations

import sqlite3

from mplp_lsp.drift.repository import MetaRepositoryRecord, RepositoryState
from mplp_lsp.sanitize.redact import redact_name
from mplp_lsp.sources.git_state import BASELINE_KEY, HEAD_KEY
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs.refs import HEAD

_BRANCHES = "refs/heads/"


class GitRepositoryRecord:
    def __init__(self) -> None:
        self._fallback = MetaRepositoryRecord()

    def recorded(self, conn: sqlite3.Connection) -> RepositoryState | None:
        events = EventLog(conn)
        if events.get_meta(BASELINE_KEY) is None:
            return self._fallback.recorded(conn)
        target = events.get_meta(HEAD_KEY) or None
        if target is None:
            return RepositoryState(_ref(conn, HEAD), None)
        row = conn.execute(
            "SELECT head_commit FROM psg_branches WHERE ref_name = ?", (target,)
        ).fetchone()
        head = row[0] if row is not None else _ref(conn, target)
        return RepositoryState(head, target.removeprefix(_BRANCHES))

    def record(self, conn: sqlite3.Connection, state: RepositoryState) -> None:
        """The repository wins: the PSG's branch node takes its commit."""
        self._fallback.record(conn, state)
        if state.branch is not None and state.head is not None:
            conn.execute(
                "UPDATE psg_branches SET head_commit = ? WHERE ref_name = ?",
                (state.head, _BRANCHES + state.branch),
            )


def _ref(conn: sqlite3.Connection, name: str) -> str | None:
    stored = redact_name(name)  # the store keeps ref names as the events name them
    row = conn.execute("SELECT object_id FROM git_refs WHERE ref_name = ?", (stored,)).fetchone()
    return None if row is None else str(row[0])

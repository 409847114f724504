"""The hooks' spool turned into git_events: take the records in the order the hooks wrote
them, replay them against the recorded refs (:mod:`mplp_lsp.vcs.replay`), and derive the
payloads with the rules the poller uses (:func:`mplp_lsp.vcs.operations.git_events`).

Runs on the Git source's thread, in whichever process owns the store: the daemon, or the
background ingester a hook started.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from mplp_lsp.config.settings import EmailPolicy
from mplp_lsp.sources.git_diff import message_lookup
from mplp_lsp.sources.git_state import Recorded, as_current
from mplp_lsp.vcs.operations import git_events
from mplp_lsp.vcs.refs import HEAD, read_snapshot
from mplp_lsp.vcs.replay import TRANSACTION, Replay, baseline_refs, observed, ref_lines
from mplp_lsp.vcs.repo import GitRepo
from mplp_lsp.vcs.spool import Offsets, Spool
from mplp_lsp.vcs.spool_records import BASELINE, Spooled

log = logging.getLogger(__name__)

PUSH_WAIT_LIMIT = 15 * 60.0  # seconds a pre-push record waits for its push to end


@dataclass(frozen=True, slots=True)
class Ingested:
    payloads: list[dict[str, Any]]
    refs: dict[str, str]  # current names: the recorded refs once the records moved them
    head_target: str | None  # HEAD's branch now (checkouts of a branch update no ref)
    read: Offsets  # how far each taken log was used
    used: list[Spooled]


class SpoolReader:
    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self._waiting: dict[tuple[str, int], float] = {}  # pre-push records, since when

    def ingest(self, repo: GitRepo, recorded: Recorded, policy: EmailPolicy) -> Ingested | None:
        """What the spool holds beyond ``recorded.offsets``; None when nothing new."""
        taken = self.spool.take(recorded.offsets)
        if taken.malformed:
            log.warning("git spool: %d line(s) that are not hook records skipped", taken.malformed)
        if not taken.records and taken.offsets == recorded.offsets:
            return None
        info = repo.info
        now = read_snapshot(info.git_dir, info.common_dir)
        replay = None if recorded.refs is None else Replay(as_current(recorded.refs, now.refs))
        known = set() if replay is None else replay.tips()
        read: Offsets = {name: recorded.offsets.get(name, 0) for name in taken.offsets}
        used: list[Spooled] = []
        for name, spooled in taken.records:
            record = spooled.record
            if record.hook == BASELINE:
                if replay is None:  # the refs when the hooks were installed
                    replay = Replay(baseline_refs(record.lines))
                    known = replay.tips()
            elif replay is None:
                pass  # nothing to replay it against: the refs as they are now are the start
            elif record.hook == TRANSACTION:
                replay.transaction(record, ref_lines(record.lines))
            elif self._push_running(record.hook, record.git_pid, (name, spooled.end)):
                break  # the rest waits: whether the push happened shows when it is over
            else:
                for update in observed(record, info, now):
                    replay.apply(record.git_pid, update)
            read[name] = spooled.end
            used.append(spooled)
        else:
            read = dict(taken.offsets)  # to the end, lines that are not records included
        if replay is None:
            replay = Replay(dict(now.refs))
        payloads = git_events(
            repo, replay.updates, known, message_lookup(repo), email_policy=policy
        )
        refs = {ref: value for ref, value in replay.refs.items() if ref != HEAD}
        if now.head_target is None and HEAD in now.refs:
            refs[HEAD] = now.refs[HEAD]
        return Ingested(payloads, refs, now.head_target, read, used)

    def _push_running(self, hook: str, pid: int, key: tuple[str, int]) -> bool:
        if hook != "pre-push" or not _alive(pid):
            self._waiting.pop(key, None)
            return False
        since = self._waiting.setdefault(key, time.monotonic())
        return time.monotonic() - since < PUSH_WAIT_LIMIT


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    return True

"""What each git hook saw, as the ref updates the poller would derive.

Every hook ends in :func:`mplp_lsp.vcs.operations.git_events`, so whichever reports an
operation first wins and the others (the poller included) report the same operations, which
the intake drops as duplicates (it keys git events by operation). What each hook knows:

* ``reference-transaction``: every ref update with its old and new value, and the refs as
  they were while git ran (the hook script notes them: :class:`Transaction`). Our part runs
  later, when the next commands of a script may have moved or deleted those refs, so what
  counts as "known before" comes from that note, never from the repository as it is then.
  A deletion may come with a zero old value (``git branch -D`` does not check it); the
  ``prepared`` phase, where the ref still exists, reports those: its note holds the value,
  and once git has exited the ref is confirmed gone (an aborted transaction left it).
  ``HEAD`` is listed beside the branch it points to, which only counts while it is detached.
* ``post-commit``, ``post-rewrite``: the checked-out branch (or detached ``HEAD``) moved; the
  hook notes which ref and commit that is the moment it runs (our part runs later, when
  ``HEAD`` may have moved on), and the ref's reflog entry that ends at that commit gives the
  old value.
* ``post-merge``: the same, when that entry is a merge or pull (a squash merge moves nothing).
* ``post-checkout``: only a branch checkout that created the branch (``checkout -b``) is
  activity; switching branches is not an event.
* ``pre-push``: runs *before* the push and cannot know whether it succeeds, so it reports
  nothing then. Its background part waits for the push to end and then reports the
  remote-tracking refs whose reflog says ``update by push`` to the pushed commit: a push that
  failed (or was refused) left no such entry and reports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mplp_lsp.vcs.operations import MERGE_MESSAGES, RefUpdate
from mplp_lsp.vcs.refs import (
    HEAD,
    WATCHED_NAMESPACES,
    ZERO,
    ReflogEntry,
    Snapshot,
    is_oid,
    reflog_entry,
    reflog_path,
)
from mplp_lsp.vcs.repo import RepoInfo

Accept = Callable[[ReflogEntry], bool]


@dataclass(frozen=True, slots=True)
class Transaction:
    """What the ``reference-transaction`` hook script spooled: git's ``<old> <new> <ref>``
    lines, then ``phase <phase> <git pid>`` and ``tip <oid> <ref> [*]`` lines (the refs
    while git ran; ``*`` marks the branch ``HEAD`` points to)."""

    updates: list[RefUpdate]
    phase: str  # "committed" or "prepared"; "" from a script that noted nothing
    git_pid: int | None
    refs: Snapshot | None  # None from a script that noted nothing

    def deletions(self) -> list[RefUpdate]:
        """``prepared`` phase: the branches being deleted without an old value, at the value
        they have while git holds them locked."""
        if self.phase != "prepared" or self.refs is None:
            return []
        tips = self.refs.refs
        return [
            RefUpdate(u.ref, tips[u.ref], ZERO)
            for u in self.updates
            if u.old == u.new == ZERO and u.ref.startswith("refs/heads/") and u.ref in tips
        ]

    def reported(self) -> list[RefUpdate]:
        """``committed`` phase: the updates, less deletions with no old value (the
        ``prepared`` phase reported those)."""
        if self.phase == "prepared":
            return []
        return [u for u in self.updates if not u.old == u.new == ZERO]


def parse_transaction(lines: Iterable[str]) -> Transaction:
    updates: list[RefUpdate] = []
    phase, pid = "", None
    tips: dict[str, str] = {}
    head_target = None
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and is_oid(parts[0]) and is_oid(parts[1]):
            if parts[2] == HEAD or parts[2].startswith(WATCHED_NAMESPACES):
                updates.append(RefUpdate(parts[2], parts[0], parts[1]))
        elif len(parts) == 3 and parts[0] == "phase":
            phase, pid = parts[1], int(parts[2]) if parts[2].isdigit() else None
        elif len(parts) in (3, 4) and parts[0] == "tip" and is_oid(parts[1]):
            tips[parts[2]] = parts[1]
            if len(parts) == 4 and parts[3] == "*":
                head_target = parts[2]
    noted = Snapshot(tips, head_target) if phase else None
    return Transaction(updates, phase, pid, noted)


def observed(name: str, lines: list[str], info: RepoInfo, current: Snapshot) -> list[RefUpdate]:
    """The ref updates hook ``name`` (not ``reference-transaction``: see
    :class:`Transaction`) can vouch for, given its input ``lines``."""
    if name == "pre-push":
        return pushed(lines, info, current)
    accept = _ACCEPT.get(name)
    return [] if accept is None else checked_out(info, lines, accept)


def _any(_entry: ReflogEntry) -> bool:
    return True


def _merged(entry: ReflogEntry) -> bool:
    return entry.message.startswith(MERGE_MESSAGES)


def _created(entry: ReflogEntry) -> bool:
    # ``checkout -b`` writes "branch: Created from ..."; a branch whose tip is still the
    # commit that created it ("commit (initial)") is only being switched to.
    return entry.old == ZERO and entry.message.startswith("branch: Created from")


_ACCEPT: dict[str, tuple[Accept, bool]] = {
    # hook: (which reflog entries it vouches for, whether a detached HEAD counts)
    "post-commit": (_any, True),
    "post-rewrite": (_any, True),
    "post-merge": (_merged, True),
    "post-checkout": (_created, False),
}


def checked_out(info: RepoInfo, lines: list[str], accept: tuple[Accept, bool]) -> list[RefUpdate]:
    """The move of the checked-out ref, from what the hook noted (the commit, then the ref:
    ``HEAD`` when detached), if ``accept`` takes the reflog entry that made it."""
    take, detached_counts = accept
    if len(lines) != 2 or not is_oid(lines[0]):
        return []  # an unborn branch, or git could not say
    value, ref = lines[0], lines[1]
    if ref == HEAD and not detached_counts:
        return []
    if ref != HEAD and not ref.startswith("refs/heads/"):
        return []
    entry = reflog_entry(reflog_path(info.git_dir, info.common_dir, ref), value)
    if entry is None or entry.old == entry.new or not take(entry):
        return []
    return [RefUpdate(ref, entry.old, entry.new)]


def pushed(lines: Iterable[str], info: RepoInfo, current: Snapshot) -> list[RefUpdate]:
    """After a push: the remote-tracking refs it updated, from ``pre-push`` input lines
    (``<local ref> <local oid> <remote ref> <remote oid>``). Only the default mapping of a
    remote branch to ``refs/remotes/<remote>/<branch>`` is followed."""
    updates: dict[str, RefUpdate] = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 4 or parts[1] == ZERO or not parts[2].startswith("refs/heads/"):
            continue  # a deletion, or not a branch: no remote-tracking ref to show it
        local, branch = parts[1], parts[2].removeprefix("refs/heads/")
        for ref in current.refs:
            if not (ref.startswith("refs/remotes/") and ref.endswith("/" + branch)):
                continue
            entry = reflog_entry(reflog_path(info.git_dir, info.common_dir, ref), local)
            if entry is not None and entry.message.startswith("update by push"):
                updates[ref] = RefUpdate(ref, entry.old, entry.new)
    return list(updates.values())


def hook_updates(raw: list[RefUpdate], current: Snapshot) -> tuple[list[RefUpdate], set[str]]:
    """The updates to report, and the tips known before them: the refs of ``current`` (as
    they were when the hook ran), with the updated ones at their old values."""
    updates = []
    for update in raw:
        if update.ref == HEAD and current.head_target is not None:
            continue  # HEAD follows a branch; the branch's own line reports it
        if update.old != update.new:
            updates.append(update)
    touched = {update.ref for update in updates}
    before = {name: value for name, value in current.refs.items() if name not in touched}
    before.update({u.ref: u.old for u in updates if u.old != ZERO})
    known = {value for name, value in before.items() if name != HEAD}
    return updates, known

"""The hooks' records replayed against the recorded refs: the ref moves they stand for.

The ``reference-transaction`` hook gets every ref update of every transaction, in Git's
order, with its old and new value, and the spool keeps that order. Replaying the updates
one by one against the refs recorded before them gives each move its exact "before": what
:func:`mplp_lsp.vcs.operations.git_events` needs to name the commits it brought (the commits
of the new value that no ref known before reaches). Three things Git reports are not moves:

* **Storage.** ``pack-refs`` (and ``gc``, which runs it) writes every ref into
  ``packed-refs`` in one transaction (each as a creation: no old value) and then deletes the
  loose copies one by one. A creation at the value the ref already has is a copy; a later
  deletion of that ref by the same git process is the loose copy going. Neither is an
  operation, and the ref keeps its value.
* **Deletions without an old value** (``git branch -D``, and the packed copy of a deleted
  branch, reported again): the branch goes at the value recorded for it; a second report of
  the same deletion finds nothing left to delete.
* **``HEAD`` beside its branch**: a commit on a branch updates both with the same values;
  only a ``HEAD`` alone (detached) moves ``HEAD``, and only in the workspace's own worktree.

A branch whose old value differs from the recorded one moved in between without a record
(hooks removed for a while, ``core.hooksPath`` overridden for a command): that move is
replayed first, from the recorded value, so the commits it brought are not lost.

The other hooks (installed only for a git without ``reference-transaction``) tell less:
:func:`observed` turns each into the move of the checked-out branch (from its reflog) or
the remote-tracking refs a push updated, and those moves are replayed the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

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
from mplp_lsp.vcs.spool_records import HookRecord

TRANSACTION = "reference-transaction"
_BRANCHES = "refs/heads/"


@dataclass(slots=True)
class Replay:
    """The recorded refs (``HEAD`` among them while detached), moved record by record."""

    refs: dict[str, str]
    updates: list[RefUpdate] = field(default_factory=list)
    _copied: set[tuple[int, str]] = field(default_factory=set)  # (git pid, ref) packed

    def tips(self) -> set[str]:
        """The commits the refs name now (``HEAD`` aside): what is known before a move."""
        return {value for ref, value in self.refs.items() if ref != HEAD}

    def transaction(self, record: HookRecord, lines: Sequence[RefUpdate]) -> None:
        """The ref updates of one ``reference-transaction`` record (its :func:`ref_lines`)."""
        branch_moves = {(u.old, u.new) for u in lines if u.ref.startswith(_BRANCHES)}
        for update in lines:
            if update.ref == HEAD and (not record.here or (update.old, update.new) in branch_moves):
                continue  # HEAD follows its branch, or is another worktree's HEAD
            self.apply(record.git_pid, update)

    def apply(self, git_pid: int, update: RefUpdate) -> None:
        ref, old, new = update.ref, update.old, update.new
        current = self.refs.get(ref)
        if new == ZERO:
            if current is None or (git_pid, ref) in self._copied:
                return  # gone already, or the loose copy of a packed ref
            tip = old if old != ZERO else current
            self._catch_up(ref, current, tip)
            self.updates.append(RefUpdate(ref, tip, ZERO))
            del self.refs[ref]
            return
        if old == ZERO:
            self._copied.add((git_pid, ref))
        if current == new:
            return  # a copy into packed-refs, or a move recorded already
        before = current or ZERO
        if old != ZERO and current is not None:
            before = self._catch_up(ref, current, old)
        self.updates.append(RefUpdate(ref, before, new))
        self.refs[ref] = new

    def _catch_up(self, ref: str, current: str, old: str) -> str:
        """A branch that moved from ``current`` to ``old`` without a record: that move."""
        if old != current and ref.startswith(_BRANCHES):
            self.updates.append(RefUpdate(ref, current, old))
            return old
        return current


def ref_lines(lines: Iterable[str]) -> list[RefUpdate]:
    """Git's ``<old> <new> <ref>`` lines for the refs events are made of."""
    out = []
    for line in lines:
        parts = line.split(" ")
        if len(parts) != 3 or not (is_oid(parts[0]) and is_oid(parts[1])):
            continue
        if parts[2] == HEAD or parts[2].startswith(WATCHED_NAMESPACES):
            out.append(RefUpdate(parts[2], parts[0], parts[1]))
    return out


def baseline_refs(lines: Iterable[str]) -> dict[str, str]:
    """The refs of a baseline record (``<oid> <ref>`` lines: see ``hooks install``)."""
    refs = {}
    for line in lines:
        value, _, ref = line.partition(" ")
        if is_oid(value) and (ref == HEAD or ref.startswith(WATCHED_NAMESPACES)):
            refs[ref] = value
    return refs


def baseline_lines(refs: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(f"{value} {ref}" for ref, value in sorted(refs.items()))


# --- the hooks of a git without reference-transaction -------------------------------------


def observed(record: HookRecord, info: RepoInfo, now: Snapshot) -> list[RefUpdate]:
    """The ref moves a hook other than ``reference-transaction`` vouches for, read from the
    reflogs: the move of the ref checked out when a post-* hook ran (its last two arguments:
    the commit and the ref, as the hook read them), or the remote-tracking refs updated by a
    push for ``pre-push`` (once the push is over)."""
    if record.hook == "pre-push":
        return pushed(record.lines, info, now)
    accept = _ACCEPT.get(record.hook)
    if accept is None or len(record.args) < 2 or not record.here:
        return []  # not a hook we install, or another worktree's HEAD
    if record.hook == "post-merge" and record.args[0] == "1":
        return []  # a squash merge: nothing moved
    value, ref = record.args[-2], record.args[-1]
    if not is_oid(value):
        return []  # an unborn branch, or a packed ref the hook could not read
    return checked_out(info, value, ref, accept)


def _any(_entry: ReflogEntry) -> bool:
    return True


def _merged(entry: ReflogEntry) -> bool:
    return entry.message.startswith(MERGE_MESSAGES)


def _created(entry: ReflogEntry) -> bool:
    # ``checkout -b`` writes "branch: Created from ..."; a branch whose tip is still the
    # commit that created it ("commit (initial)") is only being switched to.
    return entry.old == ZERO and entry.message.startswith("branch: Created from")


# (which reflog entries a hook vouches for, whether a detached HEAD counts)
Accept = tuple[Callable[[ReflogEntry], bool], bool]

_ACCEPT: dict[str, Accept] = {
    "post-commit": (_any, True),
    "post-rewrite": (_any, True),
    "post-merge": (_merged, True),
    "post-checkout": (_created, False),
}


def checked_out(info: RepoInfo, value: str, ref: str, accept: Accept) -> list[RefUpdate]:
    """The move of the checked-out ``ref`` to ``value``, if its reflog entry is accepted."""
    take, detached_counts = accept
    if ref == HEAD and not detached_counts:
        return []
    if ref != HEAD and not ref.startswith(_BRANCHES):
        return []
    entry = reflog_entry(reflog_path(info.git_dir, info.common_dir, ref), value)
    if entry is None or entry.old == entry.new or not take(entry):
        return []
    return [RefUpdate(ref, entry.old, entry.new)]


def pushed(lines: Iterable[str], info: RepoInfo, now: Snapshot) -> list[RefUpdate]:
    """After a push: the remote-tracking refs it updated, from ``pre-push`` input lines
    (``<local ref> <local oid> <remote ref> <remote oid>``). Only the default mapping of a
    remote branch to ``refs/remotes/<remote>/<branch>`` is followed."""
    updates: dict[str, RefUpdate] = {}
    for line in lines:
        parts = line.split(" ")
        if len(parts) != 4 or parts[1] == ZERO or not parts[2].startswith(_BRANCHES):
            continue  # a deletion, or not a branch: no remote-tracking ref to show it
        local, branch = parts[1], parts[2].removeprefix(_BRANCHES)
        for ref in now.refs:
            if not (ref.startswith("refs/remotes/") and ref.endswith("/" + branch)):
                continue
            entry = reflog_entry(reflog_path(info.git_dir, info.common_dir, ref), local)
            if entry is not None and entry.message.startswith("update by push"):
                updates[ref] = RefUpdate(ref, entry.old, entry.new)
    return list(updates.values())

"""The poller's view: the ref updates between the recorded refs and the repository now.

Between two polls several operations may have happened; the poller sees their result, and
orders the changed refs as they most likely happened, from the reflogs (whole seconds).
"""

from __future__ import annotations

import heapq
from graphlib import CycleError, TopologicalSorter

from mplp_lsp.sources.git_state import as_current
from mplp_lsp.vcs.operations import MessageLookup, RefUpdate
from mplp_lsp.vcs.refs import (
    HEAD,
    ZERO,
    Snapshot,
    reflog_creation,
    reflog_entry,
    reflog_newest,
    reflog_path,
)
from mplp_lsp.vcs.repo import GitRepo

_LAST = float("inf")


def diff_updates(repo: GitRepo, before: dict[str, str], after: Snapshot) -> list[RefUpdate]:
    """One update per changed ref (two for a branch created and moved on since), in the
    order they most likely happened."""
    updates = []
    before = as_current(before, after.refs)
    for name in sorted(before.keys() | after.refs.keys()):
        old, new = before.get(name, ZERO), after.refs.get(name, ZERO)
        if old != new:
            updates += _split_creation(repo, _deleted_tip(repo, RefUpdate(name, old, new)))
    ordered = sorted(updates, key=lambda update: _order(repo, update))
    return creations_after_their_commits(ordered)


def creations_after_their_commits(updates: list[RefUpdate]) -> list[RefUpdate]:
    """Reflog times are whole seconds: a commit on ``main`` and a ``checkout -b x`` made in
    the same second tie. A branch created at a commit comes after the (last) move of another
    ref that made the commit (else that move would find the commit known already, and
    report nothing); each ref's own updates keep their order; everything else keeps the
    given order. Constraints that contradict each other (a cycle): the given order stands."""
    moves: dict[str, list[int]] = {}  # commit -> the updates that moved a ref to it
    for index, update in enumerate(updates):
        if update.old != ZERO and update.new != ZERO:
            moves.setdefault(update.new, []).append(index)
    graph: dict[int, set[int]] = {}  # update -> the updates it must come after
    previous: dict[str, int] = {}
    for index, update in enumerate(updates):
        graph[index] = {previous[update.ref]} if update.ref in previous else set()
        previous[update.ref] = index
        if update.old == ZERO and update.ref.startswith("refs/heads/"):
            later = [
                m for m in moves.get(update.new, ()) if m > index and updates[m].ref != update.ref
            ]
            graph[index].update(later[-1:])
    try:
        return [updates[index] for index in _in_order(graph)]
    except CycleError:
        return list(updates)


def _in_order(graph: dict[int, set[int]]) -> list[int]:
    """A topological order of ``graph`` that takes the smallest ready index first."""
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    ready = list(sorter.get_ready())
    heapq.heapify(ready)
    order = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        sorter.done(index)
        for released in sorter.get_ready():
            heapq.heappush(ready, released)
    return order


def _deleted_tip(repo: GitRepo, update: RefUpdate) -> RefUpdate:
    """A branch gone since the last poll may have moved on before it went (``checkout -b t``,
    commits, ``checkout main``, ``branch -d t`` between two polls): its tip when it was
    deleted is where HEAD left it, if that descends from the tip recorded. The hooks report
    that deletion with that tip; reporting the recorded one would be a second, wrong one."""
    if update.new != ZERO or update.old == ZERO or not update.ref.startswith("refs/heads/"):
        return update
    name = update.ref.removeprefix("refs/heads/")
    head_log = reflog_path(repo.info.git_dir, repo.info.common_dir, HEAD)
    left = reflog_newest(head_log, f"checkout: moving from {name} to ")
    if left is None or left.old in (update.old, ZERO):
        return update
    try:
        descends = repo.run("merge-base", update.old, left.old).strip() == update.old
    except Exception:  # an object pruned since: keep what was recorded
        return update
    return RefUpdate(update.ref, left.old, ZERO) if descends else update


def _split_creation(repo: GitRepo, update: RefUpdate) -> list[RefUpdate]:
    """A branch created and moved on between two polls: its creation, then the move, as
    the hooks report them (``branch_create`` names the commit it was created at)."""
    if update.old != ZERO or update.new == ZERO or not update.ref.startswith("refs/heads/"):
        return [update]
    path = reflog_path(repo.info.git_dir, repo.info.common_dir, update.ref)
    created = reflog_creation(path)
    if created is None or created.new == update.new:
        return [update]
    return [
        RefUpdate(update.ref, ZERO, created.new),
        RefUpdate(update.ref, created.new, update.new),
    ]


def _order(repo: GitRepo, update: RefUpdate) -> tuple[float, int, str]:
    # Reflog time first; within a second, a fetch before the merge it feeds, a commit
    # before the push that sends it. Tags have no reflog and name commits seen already.
    if update.ref.startswith("refs/tags/"):
        return (_LAST, 3, update.ref)
    entry = None
    if update.new != ZERO:
        path = reflog_path(repo.info.git_dir, repo.info.common_dir, update.ref)
        entry = reflog_entry(path, update.new)
    when = float(entry.timestamp) if entry is not None else -1.0
    if update.ref.startswith("refs/remotes/"):
        pushed = entry is not None and entry.message.startswith("update by push")
        return (when, 4 if pushed else 0, update.ref)
    return (when, 2 if update.ref == HEAD else 1, update.ref)


def message_lookup(repo: GitRepo) -> MessageLookup:
    """A ref's reflog message for the entry that moved it to a value."""

    def message(ref: str, new: str) -> str | None:
        entry = reflog_entry(reflog_path(repo.info.git_dir, repo.info.common_dir, ref), new)
        return None if entry is None else entry.message

    return message

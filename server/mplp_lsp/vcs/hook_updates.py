"""What each git hook saw, as the ref updates the poller would derive.

Every hook ends in :func:`mplp_lsp.vcs.operations.git_events`, so whichever reports an
operation first wins and the others (the poller included) produce the same payloads, which
the intake drops as duplicates. What each hook knows:

* ``reference-transaction``: every ref update with its old and new value. Two details differ
  from a snapshot diff and are evened out in :func:`hook_updates`: a deletion may come with a
  zero old value (``git branch -D`` does not check it), which is then taken from the state
  the daemon recorded; and ``HEAD`` is listed beside the branch it points to, which only
  counts while ``HEAD`` is detached.
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


def parse_lines(lines: Iterable[str]) -> list[RefUpdate]:
    """``reference-transaction`` input: ``<old> <new> <ref>`` lines."""
    updates = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and (parts[2] == HEAD or parts[2].startswith(WATCHED_NAMESPACES)):
            updates.append(RefUpdate(parts[2], parts[0], parts[1]))
    return updates


def observed(name: str, lines: list[str], info: RepoInfo, current: Snapshot) -> list[RefUpdate]:
    """The ref updates hook ``name`` can vouch for, given its input ``lines``."""
    if name == "reference-transaction":
        return parse_lines(lines)
    if name == "pre-push":
        return pushed(lines, info, current)
    accept = _ACCEPT.get(name)
    return [] if accept is None else checked_out(info, lines, accept)


def _any(_entry: ReflogEntry) -> bool:
    return True


def _merged(entry: ReflogEntry) -> bool:
    return entry.message.startswith(MERGE_MESSAGES)


def _created(entry: ReflogEntry) -> bool:
    return entry.old == ZERO


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


def hook_updates(
    raw: list[RefUpdate], current: Snapshot, recorded: dict[str, str] | None
) -> tuple[list[RefUpdate], set[str]]:
    """The updates to report, and the tips known before them: the refs as they are now,
    with the updated ones at their old values. (The recorded refs would lag behind: hook
    processes for one operation run side by side and record in any order.)"""
    previous = recorded or {}
    updates = []
    for update in raw:
        if update.ref == HEAD and current.head_target is not None:
            continue  # HEAD follows a branch; the branch's own line reports it
        if update.old == update.new == ZERO:
            old = previous.get(update.ref, ZERO)
            if old == ZERO:
                continue  # a ref nobody recorded went away: nothing exact to say
            update = RefUpdate(update.ref, old, ZERO)
        if update.old != update.new:
            updates.append(update)
    touched = {update.ref for update in updates}
    before = {name: value for name, value in current.refs.items() if name not in touched}
    before.update({u.ref: u.old for u in updates if u.old != ZERO})
    known = {value for name, value in before.items() if name != HEAD}
    return updates, known

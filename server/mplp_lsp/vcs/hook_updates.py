"""What a ``reference-transaction`` hook saw, as the ref updates the poller would derive.

git hands the hook ``<old> <new> <ref>`` lines. Two details differ from a snapshot diff and
are evened out here so both paths reach the same payloads: a deletion may come with a zero
old value (``git branch -D`` does not check it), which is then taken from the state the
daemon recorded; and ``HEAD`` is listed beside the branch it points to, which only counts
while ``HEAD`` is detached.
"""

from __future__ import annotations

from collections.abc import Iterable

from mplp_lsp.vcs.operations import RefUpdate
from mplp_lsp.vcs.refs import HEAD, WATCHED_NAMESPACES, ZERO, Snapshot


def parse_lines(lines: Iterable[str]) -> list[RefUpdate]:
    updates = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and (parts[2] == HEAD or parts[2].startswith(WATCHED_NAMESPACES)):
            updates.append(RefUpdate(parts[2], parts[0], parts[1]))
    return updates


def hook_updates(
    raw: list[RefUpdate], current: Snapshot, recorded: dict[str, str]
) -> tuple[list[RefUpdate], set[str]]:
    """The updates to report, and the tips known before them."""
    updates = []
    for update in raw:
        if update.ref == HEAD and current.head_target is not None:
            continue  # HEAD follows a branch; the branch's own line reports it
        if update.old == update.new == ZERO:
            old = recorded.get(update.ref, ZERO)
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

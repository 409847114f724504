"""The replay of ``reference-transaction`` records against the recorded refs, against a model
of what Git reports: whatever the operations (branches made, moved and deleted with or
without an old value, tags, detached commits) and however often ``pack-refs`` runs between
them, the replay yields exactly the moves that happened, in Git's order, and ends at the
refs the repository has."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.vcs.operations import RefUpdate
from mplp_lsp.vcs.refs import HEAD, ZERO
from mplp_lsp.vcs.replay import Replay, baseline_lines, baseline_refs, ref_lines
from mplp_lsp.vcs.spool_records import HookRecord
from tests.support.properties import examples

COMMITS = [f"{i:040x}" for i in range(1, 9)]
BRANCHES = ["refs/heads/main", "refs/heads/a", "refs/heads/b"]
TAGS = ["refs/tags/v1", "refs/tags/v2"]


@dataclass
class Git:
    """The refs of a repository, and what its reference-transaction hook is told."""

    refs: dict[str, str]
    head: str | None = "refs/heads/main"  # the branch HEAD points to; None: detached
    records: list[HookRecord] = field(default_factory=list)
    moves: list[RefUpdate] = field(default_factory=list)  # what really happened
    pid: int = 100

    def run(self, *transactions: list[str]) -> None:
        """One git process: its committed transactions, in order."""
        self.pid += 1
        for lines in transactions:
            self.records.append(
                HookRecord("reference-transaction", self.pid, True, (), tuple(lines))
            )

    def commit(self, value: str) -> None:
        ref = self.head or HEAD
        old = self.refs.get(ref, ZERO)
        lines = [f"{old} {value} {ref}"]
        if self.head is not None:
            lines.insert(0, f"{old} {value} HEAD")  # HEAD is listed beside its branch
        self.refs[ref] = value
        self.moves.append(RefUpdate(ref, old, value))
        self.run(lines)

    def branch(self, ref: str, value: str) -> None:
        if ref in self.refs:
            return
        self.refs[ref] = value
        self.moves.append(RefUpdate(ref, ZERO, value))
        self.run([f"{ZERO} {value} {ref}"])

    def delete(self, ref: str, with_old: bool) -> None:
        if ref not in self.refs or ref == self.head:
            return
        old = self.refs.pop(ref)
        self.moves.append(RefUpdate(ref, old, ZERO))
        given_old = old if with_old else ZERO
        # The loose ref, then the packed copy (git branch -D reports both, without values).
        self.run([f"{given_old} {ZERO} {ref}"], [f"{ZERO} {ZERO} {ref}"])

    def detach(self) -> None:
        if self.head is None:
            return
        value = self.refs[self.head]
        self.head = None
        self.refs[HEAD] = value
        self.run([f"{ZERO} {value} HEAD"])
        self.moves.append(RefUpdate(HEAD, ZERO, value))

    def pack_refs(self) -> None:
        """Every ref into packed-refs (creations), then each loose copy deleted."""
        refs = [ref for ref in sorted(self.refs) if ref != HEAD]
        packed = [f"{ZERO} {self.refs[ref]} {ref}" for ref in refs]
        pruned = [[f"{self.refs[ref]} {ZERO} {ref}"] for ref in refs]
        self.run(packed, *pruned)


operation = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(COMMITS)),
    st.tuples(st.just("branch"), st.sampled_from(BRANCHES + TAGS), st.sampled_from(COMMITS)),
    st.tuples(st.just("delete"), st.sampled_from(BRANCHES), st.booleans()),
    st.tuples(st.just("detach")),
    st.tuples(st.just("pack_refs")),
)


@settings(deadline=None, max_examples=examples(150))
@given(st.lists(operation, max_size=25))
def test_the_replay_yields_what_happened_and_nothing_else(
    operations: list[tuple[Any, ...]],
) -> None:
    git = Git({"refs/heads/main": COMMITS[0]})
    start = dict(git.refs)
    for name, *args in operations:
        if name == "commit" and git.refs.get(git.head or HEAD) == args[0]:
            continue  # a commit is a new object: never the value the ref has
        getattr(git, name)(*args)
    replay = Replay(dict(start))
    for record in git.records:
        replay.transaction(record, ref_lines(record.lines))
    assert replay.updates == git.moves
    assert replay.refs == git.refs


def test_a_branch_moved_without_a_record_is_caught_up_first() -> None:
    # Recorded main at 1; git then says main moved from 2 to 3 (1 -> 2 went unrecorded).
    replay = Replay({"refs/heads/main": COMMITS[0]})
    record = HookRecord("reference-transaction", 1, True, (), ())
    replay.transaction(record, [RefUpdate("refs/heads/main", COMMITS[1], COMMITS[2])])
    assert replay.updates == [
        RefUpdate("refs/heads/main", COMMITS[0], COMMITS[1]),
        RefUpdate("refs/heads/main", COMMITS[1], COMMITS[2]),
    ]


def test_head_of_another_worktree_is_not_this_head() -> None:
    replay = Replay({"refs/heads/main": COMMITS[0]})
    there = HookRecord("reference-transaction", 1, False, (), ())
    replay.transaction(there, [RefUpdate(HEAD, COMMITS[0], COMMITS[1])])
    assert replay.updates == [] and HEAD not in replay.refs


def test_a_baseline_record_gives_the_refs_it_lists() -> None:
    refs = {"refs/heads/main": COMMITS[0], "refs/tags/v1": COMMITS[1], HEAD: COMMITS[2]}
    lines = (*baseline_lines(refs), "garbage", f"{COMMITS[3]} refs/notes/commits")
    assert baseline_refs(lines) == refs

"""The poller's order of the refs changed between two polls (reflog seconds tie): every
update once, each ref's updates in their order, a branch created at a commit after the move
of another ref that made it."""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.sources.git_diff import creations_after_their_commits
from mplp_lsp.vcs.operations import RefUpdate
from mplp_lsp.vcs.refs import ZERO
from tests.support.properties import examples

COMMITS = [ZERO, *(f"{i:040x}" for i in range(1, 5))]
REFS = ["refs/heads/main", "refs/heads/a", "refs/heads/b", "refs/tags/v1", "HEAD"]

updates_lists = st.lists(
    st.builds(RefUpdate, st.sampled_from(REFS), st.sampled_from(COMMITS), st.sampled_from(COMMITS)),
    max_size=12,
)


def creations_and_movers(updates: list[RefUpdate]) -> list[tuple[int, int]]:
    """(creation, the last later move of another ref to its commit), by index."""
    pairs = []
    for index, update in enumerate(updates):
        if update.old == ZERO and update.ref.startswith("refs/heads/"):
            movers = [
                m
                for m, other in enumerate(updates)
                if m > index
                and other.ref != update.ref
                and ZERO not in (other.old, other.new)
                and other.new == update.new
            ]
            if movers:
                pairs.append((index, movers[-1]))
    return pairs


@settings(max_examples=examples(400))
@given(updates_lists)
def test_every_update_once_and_each_refs_in_its_order(updates: list[RefUpdate]) -> None:
    ordered = creations_after_their_commits(updates)
    position = {id(u): i for i, u in enumerate(ordered)}
    assert sorted(map(id, ordered)) == sorted(map(id, updates))
    for ref in REFS:
        mine = [position[id(u)] for u in updates if u.ref == ref]
        assert mine == sorted(mine)


@settings(max_examples=examples(400))
@given(updates_lists)
def test_a_creation_follows_the_move_that_made_its_commit(updates: list[RefUpdate]) -> None:
    pairs = creations_and_movers(updates)
    graph: dict[int, set[int]] = {i: set() for i in range(len(updates))}
    for creation, mover in pairs:
        graph[creation].add(mover)
    for index, update in enumerate(updates):
        earlier = [i for i in range(index) if updates[i].ref == update.ref]
        graph[index].update(earlier[-1:])
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError:
        return  # contradictory reflog ties: nothing to hold the order to
    ordered = creations_after_their_commits(updates)
    position = {id(u): i for i, u in enumerate(ordered)}
    for creation, mover in pairs:
        assert position[id(updates[creation])] > position[id(updates[mover])]


def test_a_checkout_b_in_the_second_of_the_commit_comes_after_it() -> None:
    a, b = COMMITS[1], COMMITS[2]
    created = RefUpdate("refs/heads/topic", ZERO, b)
    moved = RefUpdate("refs/heads/main", a, b)
    assert creations_after_their_commits([created, moved]) == [moved, created]

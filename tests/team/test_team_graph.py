"""The team graph does not depend on arrival: out of order and repeated gives the in-order graph.

Each example builds integration events from several streams (workstations) on two
repositories, applies them once in timestamp order to one database and, to another, in a
random order, in random batches, with some sent twice; the graph rows must be equal. The
write path is the collector's own (:meth:`PgCollector.receive`), on a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.support.properties import examples
from tests.support.team import deliver
from tests.team.graph_dump import clear, dump

REPOS = ("https://git.example.org/team/a.git", "https://git.example.org/team/b.git")
STREAMS = ("ws-0", "ws-1", "ws-2")
BRANCHES = ("refs/heads/main", "refs/heads/dev", "refs/tags/v1")
PATHS = ("src/a.py", "src/b.py", "README.md")


def when(second: int) -> str:
    return f"2026-03-02T08:{second // 60:02d}:{second % 60:02d}.000Z"


def commit_payload(repo: str, number: int) -> dict[str, Any]:
    """A commit's own facts depend only on the commit: every workstation reports the same."""
    return {
        "repo_url": repo,
        "commit_id": f"{number:040x}",
        "author_name": f"Dev {number % 3}",
        "author_email": f"dev{number % 3}@example.org",
        "commit_message": f"change {number}",
        "timestamp": when(number * 7 % 3600),
        "parent_commits": [f"{number - 1:040x}"] if number else [],
    }


git_events = st.builds(
    lambda stream, number, kind, ref, second: (
        stream,
        Kind.GIT,
        {
            **commit_payload(REPOS[stream % 2], number),
            "ref_name": ref,
            "event_kind": kind,
            **({} if kind in ("commit", "merge") else {"timestamp": when(second)}),
        },
    ),
    st.integers(0, 2),
    st.integers(0, 6),
    st.sampled_from(["commit", "merge", "branch_create", "branch_delete", "push"]),
    st.sampled_from(BRANCHES),
    st.integers(0, 30),
)
file_events = st.builds(
    lambda stream, path, change, previous, second: (
        stream,
        Kind.FILE_UPDATE,
        {
            "file_path": path,
            "change_type": change,
            "timestamp": when(second),
            **({"previous_path": previous} if change == "renamed" else {}),
        },
    ),
    st.integers(0, 2),
    st.sampled_from(PATHS),
    st.sampled_from(["created", "modified", "deleted", "renamed"]),
    st.sampled_from(PATHS),
    st.integers(0, 30),
)
ci_events = st.builds(
    lambda stream, run, status, second, done: (
        stream,
        Kind.CI,
        {
            "ci_provider": "gitlab-ci",
            "pipeline_id": "build",
            "run_id": str(run),
            "status": status,
            "started_at": when(second),
            **(
                {"completed_at": when(second + done)}
                if status not in ("pending", "running")
                else {}
            ),
            "stages": [{"stage_name": "test", "status": status}],
        },
    ),
    st.integers(0, 2),
    st.integers(0, 2),
    st.sampled_from(["pending", "running", "succeeded", "failed", "cancelled"]),
    st.integers(0, 30),
    st.integers(0, 5),
)


def envelopes(
    specs: list[tuple[int, Kind, dict[str, Any]]], seconds: list[int]
) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for (stream, kind, payload), second in zip(specs, seconds, strict=True):
        envelope = build_envelope(
            kind,
            payload,
            source_module="test",
            event_id=str(uuid.UUID(int=random.getrandbits(128), version=4)),
            timestamp=when(second),
        )
        out.append((STREAMS[stream], envelope))
    return out


def per_stream(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, list[dict[str, Any]]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for stream, envelope in events:
        grouped[stream].append(envelope)
    return list(grouped.items())


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    specs=st.lists(st.one_of(git_events, file_events, ci_events), min_size=1, max_size=40),
    data=st.data(),
)
def test_any_order_and_repetition_give_the_in_order_graph(
    pg_cluster: postgres.Cluster, specs: list[Any], data: st.DataObject
) -> None:
    in_order, shuffled = _databases(pg_cluster)
    clear(in_order[1])
    clear(shuffled[1])
    seconds = data.draw(st.lists(st.integers(0, 40), min_size=len(specs), max_size=len(specs)))
    events = envelopes(specs, seconds)
    ordered = sorted(events, key=lambda e: (e[1]["timestamp"], e[1]["event_id"]))
    asyncio.run(deliver(in_order[0], [(s, [e]) for s, e in ordered]))

    arrival = data.draw(st.permutations(events))
    repeats = data.draw(st.lists(st.sampled_from(events), max_size=10))
    arrival = [*arrival, *repeats]
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(arrival) - 1)), max_size=6)))
    chunks = [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)]
    asyncio.run(deliver(shuffled[0], [b for chunk in chunks for b in per_stream(chunk)]))

    assert dump(shuffled[1]) == dump(in_order[1])


_made: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {}


def _databases(cluster: postgres.Cluster) -> tuple[tuple[str, str], tuple[str, str]]:
    """Two databases kept for the whole property run: (collector URL, psql URL) each."""
    if "pair" not in _made:
        pair = []
        for name in ("graph_in_order", "graph_shuffled"):
            url = cluster.create_database(name)
            asyncio.run(deliver(url, []))  # runs the migrations
            pair.append((url, cluster.psql_url(name)))
        _made["pair"] = (pair[0], pair[1])
    return _made["pair"]

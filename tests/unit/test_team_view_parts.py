"""The team view's pure parts: a stream's report, how people and machines are named, and
the four DORA keys, against their definitions (docs/team.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.collector.stream_report import ReportRejected, StreamReport, parse_report
from mplp_lsp.collector.team_names import AliasFileError, Naming, load_aliases, machine_hash, short
from mplp_lsp.ui import dora

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
report_like = st.fixed_dictionaries(
    {"source": st.text(max_size=20) | json_values, "backlog": st.integers() | json_values},
    optional={
        "backlog_oldest": st.none() | st.text(max_size=30) | st.just("2026-03-01T08:00:00Z"),
        "origin": st.none() | st.text(max_size=600) | json_values,
        "machine": st.none() | st.text(max_size=20),
    },
)


@given(json_values | report_like)
def test_a_report_is_parsed_or_refused_with_a_reason(value: Any) -> None:
    try:
        report = parse_report(value)
    except ReportRejected as rejected:
        assert str(rejected)
        return
    assert isinstance(report, StreamReport) and report.stream and report.backlog >= 0
    assert report.backlog_oldest is None or report.backlog_oldest.tzinfo is not None


def test_a_full_report_keeps_every_field() -> None:
    report = parse_report(
        json.loads(
            '{"source": "s", "backlog": 3, "backlog_oldest": "2026-03-01T08:00:00Z",'
            ' "origin": "o", "machine": "m", "author_name": " Ada ", "author_email": "a@x",'
            ' "previous_stream": "p", "unknown": 1}'
        )
    )
    assert report == StreamReport(
        "s", 3, datetime(2026, 3, 1, 8, tzinfo=UTC), "o", "m", "Ada", "a@x", "p"
    )
    with pytest.raises(ReportRejected):
        parse_report({"source": "s", "backlog": True})  # a boolean is not a count


def test_names_are_hashed_by_default_named_on_request_and_aliased() -> None:
    author = "0123456789abcdef01234567"
    assert Naming().person(author, "Ada") == short(author)
    assert Naming().machine("Ada-Laptop") == short(machine_hash("ada-laptop"))
    assert Naming("names").person(author, "Ada") == "Ada"
    assert Naming("names").person(author, None) == short(author)  # no name known
    assert Naming("names").machine("ada-laptop") == "ada-laptop"
    aliased = Naming("hashed", {short(author): "The Lead"})
    assert aliased.person(author, "Ada") == "The Lead"
    assert Naming().person(None) is None and Naming().machine("") is None


def test_an_alias_file_is_toml_of_short_hashes(tmp_path: Path) -> None:
    path = tmp_path / "aliases.toml"
    path.write_text('"0123456789ABCDEF" = "Ada"\n')
    assert load_aliases(path) == {"0123456789ab": "Ada"}
    path.write_text('"0123456789ab" = 3\n')
    with pytest.raises(AliasFileError):
        load_aliases(path)
    path.write_text("not toml [")
    with pytest.raises(AliasFileError):
        load_aliases(path)


def run(pipeline: str, number: int, status: str, commit: str | None, hours: float) -> dora.Run:
    return dora.Run(pipeline, str(number), status, T0 + hours * HOUR, commit)


def linear(count: int) -> dict[str, dora.Commit]:
    """c0 .. c{count-1}, an hour apart, each the parent of the next."""
    return {f"c{n}": dora.Commit(T0 + n * HOUR, (f"c{n - 1}",) if n else ()) for n in range(count)}


def test_the_keys_of_a_known_history() -> None:
    commits = linear(4)
    runs = [
        run("deploy", 1, "succeeded", "c1", 3),  # brings c0 (3 h) and c1 (2 h)
        run("deploy", 2, "failed", "c2", 4),
        run("deploy", 3, "cancelled", "c2", 4.5),  # neither deployment nor failure
        run("deploy", 4, "failed", "c2", 5),  # the same outage
        run("deploy", 5, "succeeded", "c3", 8),  # brings c2 (6 h) and c3 (5 h); restores 4 h
    ]
    keys = dora.keys(runs, commits, T0, T0 + 7 * 24 * HOUR)
    assert keys["deployment_frequency"]["deployments"] == 2
    assert keys["deployment_frequency"]["per_week"] == 2.0
    assert keys["lead_time"]["median_s"] == 4 * 3600  # median of 2, 3, 5, 6 h
    assert keys["change_failure_rate"]["rate"] == 0.5  # 2 of 4 (the cancelled one is not)
    assert (keys["time_to_restore"]["median_s"], keys["time_to_restore"]["open"]) == (4 * 3600, 0)


def test_an_outage_still_open_is_counted_beside_the_median() -> None:
    runs = [run("deploy", 1, "succeeded", "c0", 1), run("deploy", 2, "failed", "c0", 2)]
    keys = dora.keys(runs, linear(1), T0, T0 + 24 * HOUR)
    assert keys["time_to_restore"] == {
        "median_s": None,
        "restored": 0,
        "open": 1,
        "explain": keys["time_to_restore"]["explain"],
    }
    assert "1 not restored yet" in keys["time_to_restore"]["explain"]


def test_a_period_without_runs_has_no_figures() -> None:
    keys = dora.keys([], {}, T0, T0 + 24 * HOUR)
    assert keys["deployment_frequency"]["deployments"] == 0
    assert keys["lead_time"]["median_s"] is None
    assert keys["change_failure_rate"]["rate"] is None


@given(st.lists(st.tuples(st.integers(0, 29), st.booleans()), max_size=15))
def test_every_commit_is_brought_by_one_deployment_only(deploys: list[tuple[int, bool]]) -> None:
    """Whatever commits the successful runs deploy, in any order, each commit up to the
    furthest deployed counts once in the lead time (a run may deploy an older commit)."""
    commits = linear(30)
    runs = [
        run("deploy", n, "succeeded" if ok else "failed", f"c{head}", 40 + n)
        for n, (head, ok) in enumerate(deploys)
    ]
    keys = dora.keys(runs, commits, T0, T0 + 1000 * HOUR)
    furthest = max((head for head, ok in deploys if ok), default=-1)
    assert keys["lead_time"]["commits"] == furthest + 1


def test_deployment_pipelines_match_the_patterns_in_any_case() -> None:
    patterns = ("*deploy*", "release-*")
    assert dora.is_deployment_pipeline("Deploy-Prod", patterns)
    assert dora.is_deployment_pipeline("release-2", patterns)
    assert not dora.is_deployment_pipeline("build", patterns)

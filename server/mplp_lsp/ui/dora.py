"""The four DORA keys of a repository over a period, from its CI runs and its commits.

The definitions (docs/team.md; the dashboard shows each with its figure):

- **Deployment**: a run of a *deployment pipeline* that finished ``succeeded``. A pipeline
  is a deployment pipeline when its id matches one of the team's patterns (``--deploy-
  pipeline``, shell-style, case-insensitive; ``*deploy*`` and ``*release*`` by default).
  A run belongs to the repository of its commit.
- **Deployment frequency**: deployments that finished in the period, per week.
- **Lead time for changes**: for each deployment, the commits it brought that the previous
  deployment of the same pipeline had not (ancestors of its commit, less the ancestors of
  every earlier deployment's commit), each from its commit time to the deployment's end;
  the median over the period's deployments.
- **Change failure rate**: of the deployment pipeline runs that finished ``succeeded`` or
  ``failed`` in the period, the share that failed (a ``cancelled`` run counts as neither).
- **Time to restore**: an outage starts when a deployment pipeline's run fails after a
  success (or as its first run) and ends when a later run of the same pipeline succeeds;
  the median duration of the outages that started in the period and have ended (those
  still open are counted beside it).

Pure functions, no database: :mod:`mplp_lsp.ui.team_data` loads the rows.
"""

from __future__ import annotations

import fnmatch
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

__all__ = ["Commit", "Run", "is_deployment_pipeline", "keys"]

_WEEK: Final = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class Run:
    """A finished run of a deployment pipeline."""

    pipeline: str  # "<ci_provider>/<pipeline_id>"
    run_id: str
    status: str  # succeeded | failed | cancelled
    finished_at: datetime
    commit_id: str | None


@dataclass(frozen=True, slots=True)
class Commit:
    committed_at: datetime
    parents: tuple[str, ...]


def is_deployment_pipeline(pipeline_id: str, patterns: Iterable[str]) -> bool:
    name = pipeline_id.lower()
    return any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in patterns)


def keys(
    runs: Sequence[Run],
    commits: Mapping[str, Commit],
    since: datetime,
    until: datetime,
) -> dict[str, Any]:
    """The four keys of one repository for runs finished in ``[since, until)``; ``runs``
    may start earlier (earlier deployments and outages are what the period's compare to)."""
    ordered = sorted(runs, key=lambda r: (r.finished_at, r.run_id))
    in_period = [r for r in ordered if since <= r.finished_at < until]
    deployments = [r for r in in_period if r.status == "succeeded"]
    weeks = (until - since) / _WEEK
    return {
        "deployment_frequency": _frequency(deployments, weeks),
        "lead_time": _lead_time(ordered, commits, since, until),
        "change_failure_rate": _failure_rate(in_period),
        "time_to_restore": _restore(ordered, since, until),
    }


def _frequency(deployments: list[Run], weeks: float) -> dict[str, Any]:
    count = len(deployments)
    per_week = count / weeks if weeks > 0 else None
    pipelines = sorted({r.pipeline for r in deployments})
    return {
        "deployments": count,
        "per_week": None if per_week is None else round(per_week, 2),
        "explain": (
            f"{count} successful run{'s' * (count != 1)} of deployment pipelines"
            + (f" ({', '.join(pipelines)})" if pipelines else "")
            + f" in {_span(weeks)}"
        ),
    }


def _lead_time(
    ordered: list[Run], commits: Mapping[str, Commit], since: datetime, until: datetime
) -> dict[str, Any]:
    seconds: list[float] = []
    deployed: dict[str, set[str]] = defaultdict(set)  # per pipeline: every commit it shipped
    counted = 0
    for run in ordered:
        if run.status != "succeeded" or run.commit_id is None:
            continue
        brought = _new_ancestors(run.commit_id, commits, deployed[run.pipeline])
        deployed[run.pipeline] |= brought
        if since <= run.finished_at < until:
            counted += 1
            seconds += [
                max(0.0, (run.finished_at - commits[c].committed_at).total_seconds())
                for c in brought
            ]
    median = statistics.median(seconds) if seconds else None
    return {
        "median_s": median,
        "commits": len(seconds),
        "explain": (
            f"median over {len(seconds)} commit{'s' * (len(seconds) != 1)} brought by"
            f" {counted} deployment{'s' * (counted != 1)}: from each commit to the end of"
            " the first successful deployment that included it"
        ),
    }


def _new_ancestors(head: str, commits: Mapping[str, Commit], deployed: set[str]) -> set[str]:
    """``head`` and its ancestors known to the graph, short of what was deployed before."""
    found: set[str] = set()
    frontier = [head]
    while frontier:
        commit = frontier.pop()
        if commit in found or commit in deployed or commit not in commits:
            continue
        found.add(commit)
        frontier.extend(commits[commit].parents)
    return found


def _failure_rate(in_period: list[Run]) -> dict[str, Any]:
    attempts = [r for r in in_period if r.status in ("succeeded", "failed")]
    failed = sum(r.status == "failed" for r in attempts)
    rate = failed / len(attempts) if attempts else None
    return {
        "rate": None if rate is None else round(rate, 4),
        "failed": failed,
        "attempts": len(attempts),
        "explain": (
            f"{failed} of {len(attempts)} deployment pipeline run{'s' * (len(attempts) != 1)}"
            " that finished succeeded or failed, failed"
        ),
    }


def _restore(ordered: list[Run], since: datetime, until: datetime) -> dict[str, Any]:
    durations: list[float] = []
    down_since: dict[str, datetime] = {}  # per pipeline: the start of its open outage
    for run in ordered:
        if run.status == "failed":
            down_since.setdefault(run.pipeline, run.finished_at)
        elif run.status == "succeeded" and run.pipeline in down_since:
            started = down_since.pop(run.pipeline)
            if since <= started < until:
                durations.append((run.finished_at - started).total_seconds())
    still_open = sum(since <= started < until for started in down_since.values())
    median = statistics.median(durations) if durations else None
    return {
        "median_s": median,
        "restored": len(durations),
        "open": still_open,
        "explain": (
            f"median over {len(durations)} outage{'s' * (len(durations) != 1)}: from a failed"
            " deployment run to the next successful run of the same pipeline"
            + (f"; {still_open} not restored yet" if still_open else "")
        ),
    }


def _span(weeks: float) -> str:
    days = round(weeks * 7)
    return f"{days} day{'s' * (days != 1)}"

"""The team view in a real browser: people named as the team chose, and the four DORA keys.

A PostgreSQL collector receives, as forwarders send them, a fixture whose answers are
known: one repository with four commits, and a deployment pipeline that succeeds, fails,
is restored and succeeds again (plus a build pipeline, which is not a deployment):

- deployment frequency: 3 deployments in the period (30 days: 0.7 per week; 7 days: 3);
- lead time for changes: the commits each deployment brought, 26 h, 2 h, 3 h and 1 h
  after they were made: median 2.5 h;
- change failure rate: 1 failed of 4 finished deployment runs: 25 %;
- time to restore: the failed run to the next successful one: 2 h.

Two workstations report their git authors; Bob only edits files, so his activity is his
workstation's. Debian's Chromium shows the page with ``--names names`` (and a screenshot
for docs/img), the default hashed names, and an alias file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.collector.team_graph import author_hash
from mplp_lsp.collector.team_names import machine_hash, short
from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.team.conftest import READ_TOKEN, TOKEN, pg_cluster, pg_url, start_collector  # noqa: F401
from tests.ui.conftest import browser, pictures  # noqa: F401 - fixtures used here

pytestmark = pytest.mark.realhost

REPO = "https://git.example.org/team/shop.git"
NOW = datetime.now(UTC).replace(microsecond=0)
DAY, HOUR = timedelta(days=1), timedelta(hours=1)
COMMITS = {f"{n:040x}": NOW - (7 - n) * DAY for n in (1, 2, 3, 4)}  # c1 .. c4, a day apart
C1, C2, C3, C4 = COMMITS
# (run, status, commit, finished): c1+c2 at 26 h and 2 h, fails, c3 at 3 h, c4 at 1 h
DEPLOYS = [
    ("1", "succeeded", C2, COMMITS[C2] + 2 * HOUR),
    ("2", "failed", C3, COMMITS[C3] + 1 * HOUR),
    ("3", "succeeded", C3, COMMITS[C3] + 3 * HOUR),
    ("4", "succeeded", C4, COMMITS[C4] + 1 * HOUR),
]
ADA = ("Ada Lovelace", "ada@example.org", "ada-laptop")
BOB = ("Bob Builder", "bob@example.org", "bob-desktop")


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def git_event(commit: str, parent: str | None) -> dict[str, Any]:
    return build_envelope(
        Kind.GIT,
        {
            "repo_url": REPO,
            "commit_id": commit,
            "ref_name": "refs/heads/main",
            "event_kind": "commit",
            "author_name": ADA[0],
            "author_email": ADA[1],
            "commit_message": f"change {commit[-1]}",
            "timestamp": stamp(COMMITS[commit]),
            "parent_commits": [parent] if parent else [],
        },
        source_module="test",
        timestamp=stamp(COMMITS[commit]),
    )


def ci_event(
    pipeline: str, run: str, status: str, commit: str, finished: datetime
) -> dict[str, Any]:
    return build_envelope(
        Kind.CI,
        {
            "ci_provider": "gitlab-ci",
            "pipeline_id": pipeline,
            "run_id": run,
            "status": status,
            "started_at": stamp(finished - 10 * timedelta(minutes=1)),
            "completed_at": stamp(finished),
            "branch_name": "main",
            "commit_id": commit,
        },
        source_module="test",
        timestamp=stamp(finished),
    )


def file_event(path: str, moment: datetime) -> dict[str, Any]:
    return build_envelope(
        Kind.FILE_UPDATE,
        {"file_path": path, "change_type": "modified", "timestamp": stamp(moment)},
        source_module="test",
        timestamp=stamp(moment),
    )


def send(url: str, path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


def feed(url: str) -> None:
    """What two workstations' forwarders send: their reports, then their batches."""
    for stream, (name, email, machine) in (("ws-ada", ADA), ("ws-bob", BOB)):
        report = {"source": stream, "backlog": 0, "machine": machine, "origin": stream}
        send(url, "/streams/report", {**report, "author_name": name, "author_email": email})
    commits = [git_event(c, p) for c, p in zip(COMMITS, [None, C1, C2, C3], strict=True)]
    deploys = [ci_event("deploy-prod", *run) for run in DEPLOYS]
    build = ci_event("build", "9", "failed", C4, COMMITS[C4] + HOUR)
    ada = [*commits, *deploys, build, file_event("shop/cart.py", NOW - 2 * DAY)]
    bob = [file_event(f"shop/page{n}.html", NOW - DAY) for n in range(3)]
    for stream, envelopes in (("ws-ada", ada), ("ws-bob", bob)):
        items = [{"seq": n + 1, "envelope": e} for n, e in enumerate(envelopes)]
        send(url, "/events", {"source": stream, "items": items})


def login_link(url: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", "collector", "ui", url],
        capture_output=True,
        text=True,
        env={**os.environ, "MPLP_LSP_COLLECTOR_TOKEN": READ_TOKEN},
        check=True,
        timeout=60,
    ).stdout.strip()


def open_view(browser: Any, url: str, days: str = "30") -> tuple[Any, Any]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(login_link(url))
    page.wait_for_selector("body[data-loaded='30']")
    if days != "30":
        page.select_option("#days", days)
        page.wait_for_selector(f"body[data-loaded='{days}']")
    return context, page


def keys(page: Any) -> dict[str, str]:
    block = page.locator(f"[data-repo='{REPO}']")
    return {
        kind: block.locator(f".{kind} .dora-value").inner_text()
        for kind in ("dora-frequency", "dora-lead", "dora-cfr", "dora-restore")
    }


def test_the_team_view_names_people_and_shows_the_four_keys(
    pg_url: str,  # noqa: F811
    pg_cluster: postgres.Cluster,  # noqa: F811
    tmp_path: Path,
    browser: Any,  # noqa: F811
    pictures: Path,  # noqa: F811
) -> None:
    collector = start_collector(pg_url, pg_cluster, tmp_path, "--names", "names")
    try:
        feed(collector.url)
        context, page = open_view(browser, collector.url)
        try:
            assert keys(page) == {
                "dora-frequency": "0.7 per week",
                "dora-lead": "2.5 h",
                "dora-cfr": "25 %",
                "dora-restore": "2.0 h",
            }
            delivery = page.inner_text("#delivery")
            assert "3 successful runs of deployment pipelines (gitlab-ci/deploy-prod)" in delivery
            assert "median over 4 commits brought by 3 deployments" in delivery
            assert "1 of 4 deployment pipeline runs" in delivery
            assert "gitlab-ci/build" not in page.inner_text("#deploy-patterns")
            activity = page.inner_text("#activity-body")
            assert "Ada Lovelace" in activity and "Bob Builder" in activity  # Bob: his files
            streams = page.inner_text("#streams-body")
            assert "ada-laptop" in streams and "bob-desktop" in streams
            page.screenshot(path=str(pictures / "ui-team-delivery.png"), full_page=False)
        finally:
            context.close()
        context, page = open_view(browser, collector.url, days="7")
        try:
            assert keys(page)["dora-frequency"] == "3 per week"  # the same 3, in one week
        finally:
            context.close()
    finally:
        collector.stop()

    bob = short(author_hash(BOB[1]))
    aliases = tmp_path / "aliases.toml"
    aliases.write_text(f'"{bob}" = "Robert (team lead)"\n')
    for extra, shown, hidden in (
        ((), [short(author_hash(ADA[1])), bob, short(machine_hash(ADA[2]))], [ADA[0], ADA[2]]),
        (("--aliases", str(aliases)), ["Robert (team lead)"], [BOB[0]]),
    ):
        collector = start_collector(pg_url, pg_cluster, tmp_path, *extra)
        try:
            context, page = open_view(browser, collector.url)
            try:
                text = page.inner_text("main")
                for name in shown:
                    assert name in text, name
                for name in hidden:
                    assert name not in text, name
            finally:
                context.close()
        finally:
            collector.stop()

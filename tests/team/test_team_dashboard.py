"""The team dashboard in a real browser: a PostgreSQL collector fed by two real daemons."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests import postgres
from tests.support.waiting import wait_until
from tests.team.conftest import READ_TOKEN, TOKEN, start_collector
from tests.ui.conftest import browser, git, pictures  # noqa: F401 - fixtures used here
from tests.ui.daemon import Watch, base_env

pytestmark = pytest.mark.realhost


def _get(url: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _workspace(root: Path, name: str, author: str, collector: str, env: dict[str, str]) -> Watch:
    """A Git repository with an origin, watched by a daemon that forwards to ``collector``."""
    workspace = root / name
    workspace.mkdir()
    git(workspace, env, "init", "-q", "-b", "main")
    git(workspace, env, "remote", "add", "origin", f"https://git.example.com/team/{name}.git")
    watch = Watch.start(workspace, root / f"{name}-state", env, "--remote", collector)
    (workspace / "app.py").write_text(f"print('{name}')\n")
    mine = {**env, "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": f"{author.lower()}@example.com"}
    git(workspace, mine, "add", "-A")
    git(workspace, mine, "commit", "-qm", f"first {name} change")
    wait_until(lambda: watch.printed("commit"), what="the commit recorded")
    head = subprocess.run(
        ["git", "-C", str(workspace), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The CI run on that commit, reported through the daemon's API as a CI script would.
    started = datetime.now(UTC) + timedelta(seconds=30)

    def stamp(moment: datetime) -> str:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    watch.post(
        "/integration/ci",
        {
            "ci_provider": "gitlab-ci",
            "pipeline_id": f"{name}-build",
            "run_id": "1",
            "status": "succeeded",
            "started_at": stamp(started),
            "completed_at": stamp(started + timedelta(minutes=4)),
            "branch_name": "main",
            "commit_id": head,
        },
    )
    return watch


def test_the_team_view_shows_two_workspaces(
    pg_url: str,
    pg_cluster: postgres.Cluster,
    tmp_path: Path,
    browser: Any,  # noqa: F811
    pictures: Path,  # noqa: F811
) -> None:
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    env = {**base_env(tmp_path), "MPLP_LSP_REMOTE_TOKEN": TOKEN}
    watches: list[Watch] = []
    try:
        watches = [
            _workspace(tmp_path, "alpha", "Ada", collector.url, env),
            _workspace(tmp_path, "beta", "Grace", collector.url, env),
        ]
        team = f"{collector.url}/ui/api/team?days=7"
        wait_until(
            lambda: (
                (view := _get(team, READ_TOKEN)[1])
                and len(view["streams"]) == 2
                and len(view["lead_times"]) == 2
            ),
            timeout=60,
            what="both workspaces' commits and pipeline runs at the collector",
        )
        # Nothing without a token or a session; a read-only token reads.
        assert _get(team)[0] == 401
        assert _get(team, "forged")[0] == 401
        link = subprocess.run(
            [sys.executable, "-m", "mplp_lsp", "collector", "ui", collector.url],
            capture_output=True,
            text=True,
            env={**env, "MPLP_LSP_COLLECTOR_TOKEN": READ_TOKEN},
            check=True,
            timeout=60,
        ).stdout.strip()
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        try:
            assert link.startswith("file://")  # a private page, not a link that logs in
            page.goto(link)
            page.wait_for_selector("body[data-loaded]")
            assert page.url == f"{collector.url}/ui/"
            text = page.inner_text("main")
            for shown in ("alpha", "beta", "first alpha change", "alpha-build", "100 %", "4 min"):
                assert shown in text, shown
            assert page.inner_text("#streams-body").count("git.example.com") == 0  # names only
            assert len(page.locator("#streams-body tbody tr").all()) == 2
            # The session loads the team page; it cannot write, nor read the collector's
            # API (its own fetches, with the cookie and Sec-Fetch-Site: same-origin).
            for method, path in (("POST", "/events"), ("GET", "/events"), ("GET", "/streams")):
                status = page.evaluate(
                    f"fetch('{path}', {{method: '{method}'}}).then(r => r.status)"
                )
                assert status == 401, (method, path)
            page.screenshot(path=str(pictures / "ui-team.png"), full_page=False)
            page.set_viewport_size({"width": 390, "height": 844})  # a phone: no sideways scroll
            page.wait_for_timeout(300)
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
        finally:
            context.close()
    finally:
        for watch in watches:
            watch.stop()
        collector.stop()


def test_every_team_route_is_in_the_openapi_document() -> None:
    from mplp_lsp.collector.team_app import TeamSettings, _openapi_text, create_team_app

    app = create_team_app(TeamSettings("postgresql://unused/db", TOKEN))
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    document = json.loads(_openapi_text())
    documented = {(m.upper(), path) for path, item in document["paths"].items() for m in item}
    assert served == documented

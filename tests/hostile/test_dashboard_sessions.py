"""A dashboard session may do what its pages do, and nothing else, on both servers.

A browser session (a cookie opened with a one-time login code) reaches the routes the pages
themselves use: their assets, the data they show, and the local page's own buttons (drift
resolution, requeue). Every other route of the local API and of the team collector (plan
runs, PSG writes, integration intake, login codes, status, events, the collector's API)
answers 401/403 to it: each route the servers have is tried with a real session against
a real daemon and a real PostgreSQL collector. The session also counts only on requests
that say they come from the page itself (Sec-Fetch-Site), so curl holding a stolen cookie
gets nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mplp_lsp.api.app import build_app
from mplp_lsp.api.services import ApiServices
from tests.hostile.sessions import call, concrete, page_session
from tests.team.conftest import READ_TOKEN, TOKEN, start_collector
from tests.team.conftest import pg_cluster as pg_cluster
from tests.team.conftest import pg_url as pg_url
from tests.ui.daemon import Watch, base_env

pytestmark = pytest.mark.e2e

Route = tuple[str, str]
# What the pages use: asserted as a literal, so a route added to a page's set is a decision
# this test makes visible.
LOCAL_PAGE_ROUTES: set[Route] = {
    ("GET", "/ui"),
    ("GET", "/ui/"),
    ("GET", "/ui/static/{name}"),
    ("GET", "/ui/api/timeline"),
    ("GET", "/ui/api/timeline/events"),
    ("GET", "/ui/api/export"),
    ("GET", "/ui/api/live"),
    ("GET", "/ui/api/graph"),
    ("GET", "/ui/api/drift"),
    ("POST", "/ui/api/drift/resolve"),
    ("GET", "/ui/api/forwarding"),
    ("POST", "/ui/api/dead-letters/requeue"),
}
TEAM_PAGE_ROUTES: set[Route] = {
    ("GET", "/ui"),
    ("GET", "/ui/"),
    ("GET", "/ui/static/{name}"),
    ("GET", "/ui/api/team"),
}
# Open to anyone: the login page, its script and style, its form; the collector's probes
# (/health, /ready: a balancer holds no token).
OPEN_ROUTES: set[Route] = {
    ("GET", "/ui/login"),
    ("POST", "/ui/login"),
    ("GET", "/ui/login/{name}"),
    ("GET", "/health"),
    ("GET", "/ready"),
}
PLAN_ID = "3f0c5e2a-8b1d-4c6e-9a2f-1b2c3d4e5f61"


def served(app: object) -> set[Route]:
    routes = app.router.routes()  # type: ignore[attr-defined]
    return {
        (route.method, route.resource.canonical)
        for route in routes
        if route.resource is not None and route.method != "HEAD"
    }


def local_routes() -> set[Route]:
    services = ApiServices(None, None, None, None, None)  # type: ignore[arg-type]
    return served(build_app(services, "unused", lambda: ()))


def team_routes() -> set[Route]:
    from mplp_lsp.collector.team_app import TeamSettings, create_team_app

    return served(create_team_app(TeamSettings("postgresql://unused/db", TOKEN)))


def what_a_session_reaches(url: str, routes: set[Route], cookie: str) -> set[Route]:
    """The routes (besides the open ones) that answer a session with neither 401 nor 403."""
    page = {"Cookie": cookie, "Sec-Fetch-Site": "same-origin", "Origin": url}
    reached = set()
    for method, path in sorted(routes - OPEN_ROUTES):
        body: dict[str, object] | None = None if method == "GET" else {}
        answer = call(method, url + concrete(path), body=body, headers=page)
        if answer.status not in (401, 403):
            reached.add((method, path))
    return reached


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watch]:
    root = tmp_path_factory.mktemp("sessions")
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("notes\n")
    watch = Watch.start(workspace, root / "state", base_env(root))
    yield watch
    watch.stop()


def token_of(watch: Watch) -> str:
    return (watch.state_dir / "api-token").read_text()


def test_a_local_session_reaches_the_pages_routes_and_nothing_else(daemon: Watch) -> None:
    routes = local_routes()
    assert routes >= LOCAL_PAGE_ROUTES | {("POST", "/psg/plans/{plan_id}/run")}
    cookie = page_session(daemon.url, token_of(daemon))
    assert what_a_session_reaches(daemon.url, routes, cookie) == LOCAL_PAGE_ROUTES
    # The red team's plan run with the workspace executor, from the cookie alone.
    run = call(
        "POST",
        f"{daemon.url}/psg/plans/{PLAN_ID}/run",
        body={"plan": {"plan_id": PLAN_ID}, "actions": [], "executor": "workspace"},
        headers={"Cookie": cookie, "Sec-Fetch-Site": "same-origin", "Origin": daemon.url},
    )
    assert run.status == 401, run.body
    assert run.json()["errors"][0]["code"] == "unauthorized"


def test_a_session_counts_only_on_the_pages_own_requests(daemon: Watch) -> None:
    cookie = page_session(daemon.url, token_of(daemon))
    timeline = f"{daemon.url}/ui/api/timeline"
    assert (
        call("GET", timeline, headers={"Cookie": cookie, "Sec-Fetch-Site": "same-origin"}).status
        == 200
    )
    assert (
        call(
            "GET", f"{daemon.url}/ui/", headers={"Cookie": cookie, "Sec-Fetch-Site": "none"}
        ).status
        == 200
    )
    # curl with the cookie (no Sec-Fetch-Site at all), another site, another local port.
    for fetch in ({}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}):
        assert call("GET", timeline, headers={"Cookie": cookie, **fetch}).status == 401, fetch
    # A navigation ("none") may read a page; it cannot press a page's button.
    requeue = call(
        "POST",
        f"{daemon.url}/ui/api/dead-letters/requeue",
        body={"all": True},
        headers={"Cookie": cookie, "Sec-Fetch-Site": "none"},
    )
    assert requeue.status == 401


def test_a_team_session_reaches_the_team_page_and_nothing_else(
    pg_url: str,
    pg_cluster: object,
    tmp_path: Path,
) -> None:
    routes = team_routes()
    assert routes >= TEAM_PAGE_ROUTES | {("GET", "/events"), ("GET", "/streams")}
    collector = start_collector(pg_url, pg_cluster, tmp_path)  # type: ignore[arg-type]
    try:
        for token in (READ_TOKEN, TOKEN):  # a session from either kind of token
            cookie = page_session(collector.url, token)
            assert what_a_session_reaches(collector.url, routes, cookie) == TEAM_PAGE_ROUTES
    finally:
        collector.stop()

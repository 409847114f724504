"""The team dashboard's page and data route on the PostgreSQL collector (``/ui/``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from mplp_lsp.api.dashboard_shell import add_page_routes, add_shell
from mplp_lsp.collector.pg_queries import Pool
from mplp_lsp.collector.team_login import SharedLogin
from mplp_lsp.ui import team_data

_DAYS = (1, 7, 30, 90, 365)
Query = Callable[[Callable[[Pool], Awaitable[Any]]], Awaitable[Any]]


def add_team_ui(
    app: web.Application, query: Query, options: team_data.TeamOptions, login: SharedLogin
) -> None:
    """``query(work)`` runs ``work(pool)`` within the instance's database bounds; ``login``
    is honoured by every instance (:mod:`.team_login`)."""

    async def team(request: web.Request) -> web.Response:
        raw = request.query.get("days", "30")
        if not raw.isdigit() or int(raw) not in _DAYS:
            body: Any = {"error": "invalid_query", "message": f"days must be one of {_DAYS}"}
            return web.json_response(body, status=400)
        view = await query(lambda pool: team_data.team_view(pool, int(raw), options))
        return web.Response(body=orjson.dumps(view), content_type="application/json")

    add_shell(app, "team.html", login)
    add_page_routes(app, (("GET", "/ui/api/team", team),))

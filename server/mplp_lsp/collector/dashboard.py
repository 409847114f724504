"""The team dashboard's page and data route on the PostgreSQL collector (``/ui/``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from mplp_lsp.api.dashboard_shell import add_page_routes, add_shell
from mplp_lsp.collector.pg_queries import Pool
from mplp_lsp.ui import team_data

_DAYS = (1, 7, 30, 90, 365)


def add_team_ui(app: web.Application, pool: Callable[[], Pool]) -> None:
    async def team(request: web.Request) -> web.Response:
        raw = request.query.get("days", "30")
        if not raw.isdigit() or int(raw) not in _DAYS:
            body: Any = {"error": "invalid_query", "message": f"days must be one of {_DAYS}"}
            return web.json_response(body, status=400)
        view = await team_data.team_view(pool(), int(raw))
        return web.Response(body=orjson.dumps(view), content_type="application/json")

    add_shell(app, "team.html")
    add_page_routes(app, (("GET", "/ui/api/team", team),))

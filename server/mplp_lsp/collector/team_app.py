"""The collector's HTTP side on PostgreSQL: ingest, the team's queries, and retention.

Tokens: the ingest token (as the SQLite collector's) may do everything; read-only tokens
(dashboards) may only ``GET``, and ask for a dashboard login code. Both are compared in
constant time. ``/health`` and the dashboard's login page need none; a dashboard session
(:mod:`mplp_lsp.api.dashboard_shell`) may only load the team page and its data.
Any failure of the database answers 503 with ``Retry-After`` (a forwarder retries it) and
is logged; a request never gets a 500 or a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import UTC, datetime, timedelta
from functools import cache, partial
from importlib import resources
from typing import Any, Final

import orjson
import psycopg
from aiohttp import web

from mplp_lsp.collector import pg_queries
from mplp_lsp.collector.ingest import MAX_BODY_BYTES, IngestGate, admit
from mplp_lsp.collector.pg_store import PgCollector, ReportedBacklog
from mplp_lsp.collector.serving import serve_app
from mplp_lsp.forward.batching import BACKLOG_HEADER, BACKLOG_OLDEST_HEADER

__all__ = ["TeamSettings", "create_team_app", "run_team_collector"]

log = logging.getLogger(__name__)

_PURGE_EVERY_S: Final = 3600.0

_COLLECTOR: Final = web.AppKey("collector", PgCollector)
_GATE: Final = web.AppKey("gate", IngestGate)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class TeamSettings:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        read_tokens: Collection[str] = (),
        password: str | None = None,
        retention_days: int | None = None,
        graph: bool = True,
        max_connections: int = 8,
        require_stream_keys: bool = False,
    ) -> None:
        if not token:
            raise ValueError("the collector needs a token")
        self.url = url
        self.token = token
        self.read_tokens = tuple(t for t in read_tokens if t)
        self.password = password
        self.retention_days = retention_days
        self.graph = graph
        self.max_connections = max_connections
        self.require_stream_keys = require_stream_keys


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS),
        status=status,
        content_type="application/json",
    )


def _retry_later(error: str) -> web.Response:
    response = _json({"error": error}, 503)
    response.headers["Retry-After"] = "1"
    return response


def _matches(given: bytes, tokens: Collection[str]) -> bool:
    # Every token is compared, so the time taken does not tell which one came close.
    return sum(hmac.compare_digest(given, f"Bearer {t}".encode()) for t in tokens) > 0


def create_team_app(settings: TeamSettings) -> web.Application:
    from mplp_lsp.api import dashboard_shell as shell
    from mplp_lsp.collector.dashboard import add_team_ui

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        # A dashboard session (a one-time login code traded for a cookie) may only load the
        # team page and its data; the collector's API needs a token.
        reading = request.method in ("GET", "HEAD")
        if not (request.path == "/health" or shell.is_open(request) or shell.page_session(request)):
            given = request.headers.get("Authorization", "").encode()
            if _matches(given, (settings.token,)):
                pass
            elif _matches(given, settings.read_tokens):
                # A read-only token may also ask for a (read-only) dashboard login code.
                if not reading and request.path != shell.CODES_PATH:
                    return _json({"error": "forbidden", "message": "a read-only token"}, 403)
            else:
                return _json({"error": "unauthorized"}, 401)
        try:
            return await handler(request)
        except web.HTTPException as error:
            return _json({"error": error.reason.lower().replace(" ", "_")}, error.status)
        except psycopg.Error as error:
            log.warning("database error on %s %s: %s", request.method, request.path, error)
            return _retry_later("database_unavailable")
        except Exception:  # a bug: logged whole here, never shown to the client
            log.exception("unexpected error on %s %s", request.method, request.path)
            return _retry_later("internal_error")

    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY_BYTES)
    shell.protect(app)
    app[_GATE] = IngestGate()

    async def open_database(app: web.Application) -> Any:
        collector = await PgCollector.open(
            settings.url,
            password=settings.password,
            max_connections=settings.max_connections,
            graph=settings.graph,
            require_stream_keys=settings.require_stream_keys,
        )
        app[_COLLECTOR] = collector
        purge = (
            asyncio.create_task(_purge_forever(collector, settings.retention_days))
            if settings.retention_days is not None
            else None
        )
        yield
        if purge is not None:
            purge.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await purge
        await collector.close()

    app.cleanup_ctx.append(open_database)
    app.router.add_post("/events", _receive)
    app.router.add_get("/events", _events)
    app.router.add_get("/repositories", _repositories)
    app.router.add_get("/repository", _repository)
    app.router.add_get("/pipelines", _pipelines)
    app.router.add_get("/streams", _streams)
    app.router.add_get("/stats", _stats)
    app.router.add_get("/openapi.json", _openapi)
    app.router.add_get("/health", _health)
    add_team_ui(app, lambda: app[_COLLECTOR].pool)
    return app


async def _purge_forever(collector: PgCollector, days: int) -> None:
    while True:
        cutoff = datetime.now(UTC) - timedelta(days=days)
        try:
            dropped = await pg_queries.purge_before(collector.pool, cutoff)
            if dropped:
                log.info("retention: dropped %d events older than %d days", dropped, days)
        except psycopg.Error as error:
            log.warning("retention: cannot drop old events now: %s", error)
        await asyncio.sleep(_PURGE_EVERY_S)


async def _receive(request: web.Request) -> web.Response:
    return await admit(request, request.app[_GATE], partial(_store, request))


async def _store(request: web.Request, body: bytes, stream_key: str | None) -> web.Response:
    answer = await request.app[_COLLECTOR].receive(
        body, request.headers.get("Idempotency-Key"), _backlog(request), stream_key=stream_key
    )
    return _json(answer.body, answer.status)


def _backlog(request: web.Request) -> ReportedBacklog | None:
    """The forwarder's reported backlog; a malformed report is dropped, never the batch."""
    text = request.headers.get(BACKLOG_HEADER)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        log.info("ignoring a malformed %s header", BACKLOG_HEADER)
        return None
    oldest = request.headers.get(BACKLOG_OLDEST_HEADER)
    try:
        moment = None if oldest is None else _instant(oldest)
    except ValueError:
        log.info("ignoring a malformed %s header", BACKLOG_OLDEST_HEADER)
        moment = None
    return ReportedBacklog(int(text), moment)


class _BadQuery(ValueError):
    pass


def _integer(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(request.query.get(name, str(default)))
    except ValueError:
        raise _BadQuery(f"{name} must be an integer") from None
    return min(high, max(low, value))


def _moment(request: web.Request, name: str) -> datetime | None:
    text = request.query.get(name)
    if text is None:
        return None
    try:
        return _instant(text)
    except ValueError:
        raise _BadQuery(f"{name} must be an ISO 8601 time") from None


def _instant(text: str) -> datetime:
    """An ISO 8601 time; without a zone, UTC."""
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def _events(request: web.Request) -> web.Response:
    after = pg_queries.Cursor.parse(request.query.get("after", "0.0"))
    if after is None:
        message = "after must be a cursor a page handed out (next or cursor)"
        return _json({"error": "invalid_query", "message": message}, 400)
    try:
        query = pg_queries.EventQuery(
            after=after,
            limit=_integer(request, "limit", 1000, 1, pg_queries.MAX_PAGE),
            stream=request.query.get("stream"),
            repository=request.query.get("repository"),
            kind=request.query.get("kind"),
            author=request.query.get("author"),
            since=_moment(request, "since"),
            until=_moment(request, "until"),
        )
    except _BadQuery as error:
        return _json({"error": "invalid_query", "message": str(error)}, 400)
    return _json(await pg_queries.event_page(request.app[_COLLECTOR].pool, query))


async def _repositories(request: web.Request) -> web.Response:
    return _json({"repositories": await pg_queries.repositories(request.app[_COLLECTOR].pool)})


async def _repository(request: web.Request) -> web.Response:
    url = request.query.get("repo_url")
    if not url:
        return _json({"error": "invalid_query", "message": "repo_url is required"}, 400)
    try:
        recent = _integer(request, "recent", 50, 1, 1000)
    except _BadQuery as error:
        return _json({"error": "invalid_query", "message": str(error)}, 400)
    graph = await pg_queries.repository(request.app[_COLLECTOR].pool, url, recent=recent)
    if graph is None:
        return _json({"error": "not_found", "message": "no such repository"}, 404)
    return _json(graph)


async def _pipelines(request: web.Request) -> web.Response:
    try:
        limit = _integer(request, "limit", 200, 1, 10_000)
    except _BadQuery as error:
        return _json({"error": "invalid_query", "message": str(error)}, 400)
    return _json({"runs": await pg_queries.pipelines(request.app[_COLLECTOR].pool, limit=limit)})


async def _streams(request: web.Request) -> web.Response:
    return _json({"streams": await pg_queries.streams(request.app[_COLLECTOR].pool)})


async def _stats(request: web.Request) -> web.Response:
    return _json(await pg_queries.stats(request.app[_COLLECTOR].pool))


@cache
def _openapi_text() -> bytes:
    return resources.files("mplp_lsp.collector").joinpath("openapi.json").read_bytes()


async def _openapi(_request: web.Request) -> web.Response:
    return web.Response(body=_openapi_text(), content_type="application/json")


async def _health(_request: web.Request) -> web.Response:
    return _json({"ok": True})


async def run_team_collector(
    settings: TeamSettings, host: str, port: int, *, ready: Callable[[str, int], None]
) -> None:
    """Serve until cancelled; ``ready(host, port)`` is called once listening (port 0 = any)."""
    await serve_app(create_team_app(settings), host, port, ready=ready)

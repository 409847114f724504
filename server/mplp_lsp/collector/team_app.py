"""The collector's HTTP side on PostgreSQL: ingest, the team's queries, probes and retention.

Tokens: the ingest token (as the SQLite collector's) may do everything; read-only tokens
(dashboards) may only ``GET``, and ask for a dashboard login code. Both are compared in
constant time. ``/health``, ``/ready`` and the dashboard's login page need none; a
dashboard session (:mod:`mplp_lsp.api.dashboard_shell`) may only load the team page and its
data. Batches and stream reports are admitted as on SQLite (:mod:`.ingest`): bounded
bodies, a few at a time, each stream written only with its own key.

Probes (docs/team.md): ``/health`` answers 200 while the process serves, database or not;
``/ready`` answers 200 only while the database takes writes (:mod:`.pg_database`), else 503.
A request that needs the database while it is unavailable, or that waits on it longer than
the database timeout, gets 503 ``database_unavailable`` with ``Retry-After`` (a forwarder
retries it); a full disk under the database gets 507 ``storage_full``, as on SQLite, logged
once per episode. A request never gets a 500 or a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache, partial
from importlib import resources
from typing import Any, Final

import orjson
import psycopg
from aiohttp import web

from mplp_lsp.collector import pg_queries
from mplp_lsp.collector.ingest import MAX_BODY_BYTES, IngestGate, admit
from mplp_lsp.collector.pg_connect import PgOptions
from mplp_lsp.collector.pg_database import Database, DatabaseUnavailable, Pool
from mplp_lsp.collector.pg_store import PgCollector, ReportedBacklog
from mplp_lsp.collector.serving import serve_app
from mplp_lsp.collector.stream_report import REPORT_PATH, ReportRejected, parse_report
from mplp_lsp.collector.team_login import SharedLogin
from mplp_lsp.collector.team_names import Naming
from mplp_lsp.forward.batching import BACKLOG_HEADER, BACKLOG_OLDEST_HEADER
from mplp_lsp.store.disk_full import MESSAGE as DISK_FULL
from mplp_lsp.store.disk_full import FullDiskEpisodes, is_disk_full

__all__ = ["TeamSettings", "create_team_app", "run_team_collector"]

log = logging.getLogger(__name__)

_PURGE_EVERY_S: Final = 3600.0
_PURGE_RETRY_S: Final = 5.0
DEFAULT_DEPLOY_PIPELINES: Final = ("*deploy*", "*release*")
_OPEN_PATHS: Final = frozenset({"/health", "/ready"})

_DATABASE: Final = web.AppKey("database", Database)
_COLLECTOR: Final = web.AppKey("collector", PgCollector)
_DISK: Final = web.AppKey("disk", FullDiskEpisodes)
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
        pool_size: int = 8,
        db_timeout: float = 5.0,
        naming: Naming | None = None,
        deploy_pipelines: Sequence[str] = DEFAULT_DEPLOY_PIPELINES,
        require_stream_keys: bool = False,
    ) -> None:
        if not token:
            raise ValueError("the collector needs a token")
        self.database = PgOptions(url, password, pool_size=pool_size, timeout=db_timeout)
        self.token = token
        self.read_tokens = tuple(t for t in read_tokens if t)
        self.retention_days = retention_days
        self.graph = graph
        self.naming = naming or Naming()
        self.deploy_pipelines = tuple(deploy_pipelines)
        self.require_stream_keys = require_stream_keys


_SETTINGS: Final = web.AppKey("settings", TeamSettings)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS),
        status=status,
        content_type="application/json",
    )


def _retry_later(error: str, message: str | None = None) -> web.Response:
    body = {"error": error} if message is None else {"error": error, "message": message}
    response = _json(body, 503)
    response.headers["Retry-After"] = "1"
    return response


def _matches(given: bytes, tokens: Collection[str]) -> bool:
    # Every token is compared, so the time taken does not tell which one came close.
    return sum(hmac.compare_digest(given, f"Bearer {t}".encode()) for t in tokens) > 0


def create_team_app(settings: TeamSettings) -> web.Application:
    from mplp_lsp.api import dashboard_shell as shell
    from mplp_lsp.collector.dashboard import add_team_ui
    from mplp_lsp.ui import team_data

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        # A dashboard session (a one-time login code traded for a cookie) may only load the
        # team page and its data; the collector's API needs a token.
        reading = request.method in ("GET", "HEAD")
        if not (
            request.path in _OPEN_PATHS or shell.is_open(request) or shell.page_session(request)
        ):
            given = request.headers.get("Authorization", "").encode()
            if _matches(given, (settings.token,)):
                pass
            elif _matches(given, settings.read_tokens):
                # A read-only token may also ask for a (read-only) dashboard login code.
                if not reading and request.path != shell.CODES_PATH:
                    return _json({"error": "forbidden", "message": "a read-only token"}, 403)
            else:
                return _json({"error": "unauthorized"}, 401)
        database = request.app[_DATABASE]
        try:
            return await handler(request)
        except web.HTTPException as error:
            return _json({"error": error.reason.lower().replace(" ", "_")}, error.status)
        except DatabaseUnavailable as error:
            return _retry_later("database_unavailable", str(error))
        except psycopg.Error as error:
            if is_disk_full(error):
                request.app[_DISK].refused_one(error)  # the forwarder keeps it and retries
                return _json({"error": "storage_full", "message": DISK_FULL}, 507)
            database.request_failed(error)
            return _retry_later("database_unavailable")
        except Exception:  # a bug: logged whole here, never shown to the client
            log.exception("unexpected error on %s %s", request.method, request.path)
            return _retry_later("internal_error")

    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY_BYTES)
    shell.protect(app)
    database = Database(settings.database)
    app[_DATABASE] = database
    app[_SETTINGS] = settings
    app[_DISK] = FullDiskEpisodes(log, "collector")
    app[_GATE] = IngestGate()

    def query(work: Callable[[Pool], Awaitable[Any]]) -> Awaitable[Any]:
        return database.bounded(work(database.current_pool()))

    login = SharedLogin(query)

    async def opened(pool: Pool, graph_id: str) -> None:
        await login.load_key(pool)
        collector = PgCollector(
            database.current_pool,
            graph_id,
            graph=settings.graph,
            require_stream_keys=settings.require_stream_keys,
        )
        app[_COLLECTOR] = collector
        # As serve_app does at start: what lives as long as the process (the compiled
        # validators, the pool) is out of the collector's reach from now on.
        gc.freeze()
        if settings.retention_days is not None:
            purges.append(asyncio.create_task(_purge_forever(database, settings.retention_days)))

    purges: list[asyncio.Task[None]] = []
    database.set_opened(opened)

    async def run_database(app: web.Application) -> Any:
        database.start()
        yield
        for task in purges:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await database.close()
        if _COLLECTOR in app:
            await app[_COLLECTOR].close()

    app.cleanup_ctx.append(run_database)
    app.router.add_post("/events", _receive)
    app.router.add_post(REPORT_PATH, _report)
    app.router.add_get("/events", _events)
    app.router.add_get("/repositories", _repositories)
    app.router.add_get("/repository", _repository)
    app.router.add_get("/pipelines", _pipelines)
    app.router.add_get("/streams", _streams)
    app.router.add_get("/stats", _stats)
    app.router.add_get("/openapi.json", _openapi)
    app.router.add_get("/health", _health)
    app.router.add_get("/ready", _ready)
    options = team_data.TeamOptions(settings.naming, settings.deploy_pipelines)
    add_team_ui(app, query, options, login)
    return app


def _collector(request: web.Request) -> PgCollector:
    """The collector once the database has been reached, else DatabaseUnavailable."""
    collector = request.app.get(_COLLECTOR)
    if collector is None:
        raise DatabaseUnavailable(request.app[_DATABASE].problem or "not reached yet")
    return collector


async def _bounded(request: web.Request, work: Callable[[Pool], Awaitable[Any]]) -> Any:
    """``work`` on the pool, within the database timeout."""
    database = request.app[_DATABASE]
    return await database.bounded(work(database.current_pool()))


async def _purge_forever(database: Database, days: int) -> None:
    while True:
        cutoff = datetime.now(UTC) - timedelta(days=days)
        try:
            dropped = await pg_queries.purge_before(database.current_pool(), cutoff)
        except (psycopg.Error, DatabaseUnavailable) as error:
            log.info("retention: cannot drop old events now (%s); trying again soon", error)
            await asyncio.sleep(_PURGE_RETRY_S)
            continue
        if dropped:
            log.info("retention: dropped %d events received over %d days ago", dropped, days)
        await asyncio.sleep(_PURGE_EVERY_S)


async def _receive(request: web.Request) -> web.Response:
    _collector(request)  # 503 at once, before the body is read, while there is no database
    return await admit(request, request.app[_GATE], partial(_store, request))


async def _store(request: web.Request, body: bytes, stream_key: str | None) -> web.Response:
    answer = await request.app[_DATABASE].bounded(
        _collector(request).receive(
            body, request.headers.get("Idempotency-Key"), _backlog(request), stream_key=stream_key
        )
    )
    if answer.status == 200:
        request.app[_DISK].stored()
    return _json(answer.body, answer.status)


async def _report(request: web.Request) -> web.Response:
    _collector(request)
    return await admit(request, request.app[_GATE], partial(_keep_report, request))


async def _keep_report(request: web.Request, body: bytes, stream_key: str | None) -> web.Response:
    try:
        report = parse_report(orjson.loads(body))
    except (orjson.JSONDecodeError, ReportRejected) as error:
        return _json({"error": "invalid_report", "message": str(error)[:200]}, 400)
    answer = await request.app[_DATABASE].bounded(_collector(request).report(report, stream_key))
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
    return _json(await _bounded(request, lambda pool: pg_queries.event_page(pool, query)))


async def _repositories(request: web.Request) -> web.Response:
    return _json({"repositories": await _bounded(request, pg_queries.repositories)})


async def _repository(request: web.Request) -> web.Response:
    url = request.query.get("repo_url")
    if not url:
        return _json({"error": "invalid_query", "message": "repo_url is required"}, 400)
    try:
        recent = _integer(request, "recent", 50, 1, 1000)
    except _BadQuery as error:
        return _json({"error": "invalid_query", "message": str(error)}, 400)
    graph = await _bounded(request, lambda pool: pg_queries.repository(pool, url, recent=recent))
    if graph is None:
        return _json({"error": "not_found", "message": "no such repository"}, 404)
    return _json(graph)


async def _pipelines(request: web.Request) -> web.Response:
    try:
        limit = _integer(request, "limit", 200, 1, 10_000)
    except _BadQuery as error:
        return _json({"error": "invalid_query", "message": str(error)}, 400)
    runs = await _bounded(request, lambda pool: pg_queries.pipelines(pool, limit=limit))
    return _json({"runs": runs})


async def _streams(request: web.Request) -> web.Response:
    naming = request.app[_SETTINGS].naming
    return _json(
        {"streams": await _bounded(request, lambda pool: pg_queries.streams(pool, naming))}
    )


async def _stats(request: web.Request) -> web.Response:
    return _json(await _bounded(request, pg_queries.stats))


@cache
def _openapi_text() -> bytes:
    return resources.files("mplp_lsp.collector").joinpath("openapi.json").read_bytes()


async def _openapi(_request: web.Request) -> web.Response:
    return web.Response(body=_openapi_text(), content_type="application/json")


async def _health(_request: web.Request) -> web.Response:
    """Liveness: the process serves (a balancer's or an orchestrator's restart signal)."""
    return _json({"ok": True})


async def _ready(request: web.Request) -> web.Response:
    """Readiness: the database took a write within the last probe (else 503)."""
    database = request.app[_DATABASE]
    checked = database.checked_at
    body = {
        "ready": database.ready,
        "problem": database.problem,
        "checked_at": None if checked is None else _iso(checked),
    }
    response = _json(body, 200 if database.ready else 503)
    response.headers["Cache-Control"] = "no-store"
    return response


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


async def run_team_collector(
    settings: TeamSettings, host: str, port: int, *, ready: Callable[[str, int], None]
) -> None:
    """Serve until cancelled; ``ready(host, port)`` is called once listening (port 0 = any).

    A configuration error of the database (:func:`~.pg_connect.is_permanent`) raises, at
    start or whenever the database is first reached; anything else is waited out."""
    # The pool logs every failed reconnection attempt; the instance's own watch logs each
    # outage once (when it starts and when it ends), so the pool's warnings are noise.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    app = create_team_app(settings)
    await app[_DATABASE].first_contact()
    await serve_app(app, host, port, ready=ready, until=lambda: app[_DATABASE].running())

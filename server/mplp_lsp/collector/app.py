"""The collector's HTTP side (aiohttp): ``POST /events``, ``GET /events``, ``GET /health``.

A forwarder's stream reports (``POST /streams/report``) are acknowledged and not kept: this
collector shows no streams (the team collector on PostgreSQL does).

Every route but ``/health`` and ``/ready`` needs ``Authorization: Bearer <token>`` (compared
in constant time). Both probes answer 200 once the database file is open: the SQLite
collector has no database to lose. The database is used from one worker thread, so
parsing, validating and committing a batch never block the event loop, and batches are
applied one at a time in arrival order. Bodies are capped and admitted a few at a time, and
a stream is written only with its own key (:mod:`.ingest`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar

from aiohttp import web

from mplp_lsp.collector.ingest import MAX_BODY_BYTES, IngestGate, admit
from mplp_lsp.collector.serving import serve_app
from mplp_lsp.collector.store import CollectorStore
from mplp_lsp.collector.stream_report import REPORT_PATH
from mplp_lsp.store.disk_full import MESSAGE as DISK_FULL
from mplp_lsp.store.disk_full import FullDiskEpisodes, is_disk_full

__all__ = ["create_app", "run_collector"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Worker:
    """The store on its own thread."""

    def __init__(self, path: Path, require_stream_keys: bool) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="collector")
        self._store = self._executor.submit(
            lambda: CollectorStore(path, require_stream_keys=require_stream_keys)
        ).result()

    async def call(self, fn: Callable[[CollectorStore], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, self._store)

    def close(self) -> None:
        self._executor.submit(self._store.close).result()
        self._executor.shutdown(wait=True)


_STORE: Final = web.AppKey("store", _Worker)
_DISK: Final = web.AppKey("disk", FullDiskEpisodes)
_GATE: Final = web.AppKey("gate", IngestGate)


def create_app(db: Path, token: str, *, require_stream_keys: bool = False) -> web.Application:
    if not token:
        raise ValueError("the collector needs a token")
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def authorize(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path not in ("/health", "/ready"):
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return web.json_response({"error": "unauthorized"}, status=401)
        response: web.StreamResponse = await handler(request)
        return response

    app = web.Application(middlewares=[authorize], client_max_size=MAX_BODY_BYTES)

    async def open_store(app: web.Application) -> Any:
        worker = await asyncio.get_running_loop().run_in_executor(
            None, _Worker, db, require_stream_keys
        )
        app[_STORE] = worker
        yield
        await asyncio.get_running_loop().run_in_executor(None, worker.close)

    app[_DISK] = FullDiskEpisodes(log, "collector")
    app[_GATE] = IngestGate()
    app.cleanup_ctx.append(open_store)
    app.router.add_post("/events", _receive)
    app.router.add_get("/events", _list)
    app.router.add_get("/stats", _stats)
    app.router.add_get("/health", _health)
    app.router.add_get("/ready", _health)
    app.router.add_post(REPORT_PATH, _health)
    return app


async def _receive(request: web.Request) -> web.Response:
    return await admit(request, request.app[_GATE], partial(_store, request))


async def _store(request: web.Request, body: bytes, stream_key: str | None) -> web.Response:
    key = request.headers.get("Idempotency-Key")
    disk = request.app[_DISK]
    try:
        answer = await request.app[_STORE].call(lambda store: store.receive(body, key, stream_key))
    except Exception as error:
        if not is_disk_full(error):
            raise
        disk.refused_one(error)  # 507: the forwarder keeps the batch and retries
        return web.json_response({"error": "storage_full", "message": DISK_FULL}, status=507)
    if answer.status == 200:
        disk.stored()
    return web.json_response(answer.body, status=answer.status)


async def _list(request: web.Request) -> web.Response:
    try:
        after = int(request.query.get("after", "0"))
        limit = min(10_000, max(1, int(request.query.get("limit", "1000"))))
    except ValueError:
        return web.json_response({"error": "after and limit must be integers"}, status=400)
    source = request.query.get("source")
    events = await request.app[_STORE].call(
        lambda store: store.events(after=after, limit=limit, source=source)
    )
    # A short page is the last one: no ``next``, so a client paging "while next" stops.
    following = events[-1]["id"] if len(events) == limit else None
    return web.json_response({"events": events, "next": following})


async def _stats(request: web.Request) -> web.Response:
    return web.json_response(await request.app[_STORE].call(lambda store: store.stats()))


async def _health(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def run_collector(
    db: Path,
    token: str,
    host: str,
    port: int,
    *,
    ready: Callable[[str, int], None],
    require_stream_keys: bool = False,
) -> None:
    """Serve until cancelled; ``ready(host, port)`` is called once listening (port 0 = any)."""
    app = create_app(db, token, require_stream_keys=require_stream_keys)
    await serve_app(app, host, port, ready=ready)

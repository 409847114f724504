"""The local dashboard's data routes on the daemon's API (under ``/ui/api/``).

Each handler parses its query and calls one read or one existing core operation: drift is
resolved through the same :class:`~mplp_lsp.drift.DriftMonitor` call the editor's
quick fixes make, dead letters are requeued by the same function ``mplp-lsp outbox requeue``
uses. Store reads go through the store writer's thread like every other API read.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from aiohttp import web

from mplp_lsp.api.errors import error_response
from mplp_lsp.api.services import ApiServices
from mplp_lsp.api.streaming import streamed
from mplp_lsp.protocol.result import ErrorCode
from mplp_lsp.protocol.summary import summary
from mplp_lsp.store import paging
from mplp_lsp.ui import local_graph, timeline

SERVICES: Final = web.AppKey("ui_services", ApiServices)
CLOSING: Final = web.AppKey("ui_closing", asyncio.Event)
EVENTS_LIMIT: Final = 200
EXPORT_PAGE: Final = 2000
LIVE_POLL_S: Final = 0.5  # how often the live feed looks for new events
_KEEPALIVE_S: Final = 15.0
_LIVE_BATCH: Final = 500
_CSV_COLUMNS: Final = ("seq", "event_id", "kind", "timestamp", "received_at", "envelope")


class _Refused(Exception):
    def __init__(self, name: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.response = error_response(status, name, ErrorCode.INVALID_PARAMETER, message)


def _instant(request: web.Request, name: str) -> str | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return timeline.parse_instant(raw)
    except ValueError:
        raise _Refused(name, f"{name} must be an RFC 3339 date-time") from None


async def _span(request: web.Request, services: ApiServices) -> tuple[str, str] | None:
    """``[from, to)`` from the query; a missing end is the store's first or last event."""
    start, end = _instant(request, "from"), _instant(request, "to")
    if start is None or end is None:
        stored = await services.writer.read(timeline.extent)
        if stored is None:
            return None
        start = start or stored[0]
        end = end or timeline.shift(stored[1], 0.001)  # the last event is in the range
    if end <= start:
        raise _Refused("to", "to must be after from")
    return start, end


async def timeline_buckets(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    span = await _span(request, services)
    if span is None:
        return web.json_response({"lanes": timeline.LANES, "buckets": [], "unit": None})
    start, end = span
    unit = timeline.unit_for(start, end)
    if await services.writer.read(timeline.behind):
        await services.writer.run(timeline.fold)
    rows = await services.writer.read(lambda conn: timeline.buckets(conn, start, end, unit))
    return web.json_response(
        {
            "from": start,
            "to": end,
            "unit": unit.name,
            "prefix": unit.prefix,
            "lanes": timeline.LANES,
            "buckets": rows,
        }
    )


async def timeline_events(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    span = await _span(request, services)
    lane = request.query.get("lane") or None
    if lane is not None and lane not in timeline.LANE_KINDS:
        raise _Refused("lane", f"lane must be one of {', '.join(timeline.LANES)}")
    if span is None:
        return web.json_response({"events": []})
    start, end = span
    found = await services.writer.read(
        lambda conn: timeline.events_in(conn, start, end, lane, EVENTS_LIMIT)
    )
    for event in found:
        event["envelope"] = json.loads(event.pop("body"))
        event["summary"] = summary(event["envelope"])
    return web.json_response({"events": found, "limit": EVENTS_LIMIT})


async def export(request: web.Request) -> web.StreamResponse:
    services = request.app[SERVICES]
    form = request.query.get("format", "jsonl")
    if form not in ("jsonl", "csv"):
        raise _Refused("format", "format must be jsonl or csv")
    span = await _span(request, services)
    response = web.StreamResponse(
        headers={
            "Content-Type": "application/x-ndjson" if form == "jsonl" else "text/csv",
            "Content-Disposition": f'attachment; filename="mplp-events.{form}"',
            "Cache-Control": "no-store",
        }
    )
    return await streamed(
        request, response, partial(_export_rows, services=services, span=span, form=form)
    )


async def _export_rows(
    response: web.StreamResponse,
    *,
    services: ApiServices,
    span: tuple[str, str] | None,
    form: str,
) -> None:
    if form == "csv":
        await response.write(_csv_line(list(_CSV_COLUMNS)))
    if span is not None:
        start, end = span
        # The events stored when the export began, in the order they happened.
        upto = await services.writer.read(paging.last_seq)
        window = paging.Window(since=start, until=end, upto_seq=upto)
        after: paging.Position | None = None
        while rows := await services.writer.read(
            partial(paging.page, window=window, after=after, size=EXPORT_PAGE)
        ):
            await response.write(b"".join(_export_line(row, form) for row in rows))
            after = (rows[-1][3], rows[-1][0])
    await response.write_eof()


def _export_line(row: paging.Row, form: str) -> bytes:
    seq, event_id, kind, at, received_at, body = row
    if form == "csv":
        return _csv_line([str(seq), event_id, kind, at, received_at, body])
    envelope = json.loads(body)
    line = {"seq": seq, "kind": kind, "timestamp": at, "received_at": received_at}
    return (json.dumps({**line, "envelope": envelope}, ensure_ascii=False) + "\n").encode()


def _csv_line(fields: list[str]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(fields)
    return out.getvalue().encode()


async def live(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: every newly stored event (seq, kind, lane, time) as it lands."""
    services = request.app[SERVICES]
    closing = request.app[CLOSING]
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    return await streamed(request, response, partial(_live_events, services, closing))


async def _live_events(
    services: ApiServices, closing: asyncio.Event, response: web.StreamResponse
) -> None:
    after = await services.writer.read(timeline.last_seq)
    quiet = 0.0
    await response.write(b"retry: 2000\n\n")
    while not closing.is_set():
        fresh = await services.writer.read(
            partial(timeline.latest, after_seq=after, limit=_LIVE_BATCH)
        )
        if fresh:
            after = fresh[-1]["seq"]
            payload = json.dumps({"events": fresh}, ensure_ascii=False)
            await response.write(f"event: events\ndata: {payload}\n\n".encode())
            quiet = 0.0
            continue
        quiet += LIVE_POLL_S
        if quiet >= _KEEPALIVE_S:  # a comment keeps proxies and browsers from timing out
            await response.write(b": keepalive\n\n")
            quiet = 0.0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(closing.wait(), LIVE_POLL_S)


async def graph(request: web.Request) -> web.Response:
    search = request.query.get("q", "")[:200]
    services = request.app[SERVICES]
    return web.json_response(await services.writer.read(lambda c: local_graph.graph(c, search)))


async def drift_list(request: web.Request) -> web.Response:
    monitor = request.app[SERVICES].drift
    findings = [] if monitor is None else [d.to_json() for d in monitor.drifts.values()]
    findings.sort(key=lambda d: (d["state"] != "open", d["path"]))
    return web.json_response({"drifts": findings})


async def drift_resolve(request: web.Request) -> web.Response:
    from mplp_lsp.drift import Strategy

    monitor = request.app[SERVICES].drift
    body = await _body(request)
    path, strategy = body.get("path"), body.get("strategy")
    if not isinstance(path, str) or not path:
        raise _Refused("path", "path must be the workspace-relative path of a finding")
    if strategy not in {s.value for s in Strategy}:
        raise _Refused("strategy", "strategy must be one of fs, psg, merge, ignore")
    if monitor is None:
        raise _Refused("path", "this workspace has no drift monitor", 404)
    resolution = await monitor.resolve(path, Strategy(strategy))
    return web.json_response(resolution.to_json(), status=200 if resolution.ok else 409)


async def forwarding(request: web.Request) -> web.Response:
    from dataclasses import asdict

    from mplp_lsp.forward.outbox import dead_letters
    from mplp_lsp.forward.retry import RetryPolicy
    from mplp_lsp.forward.status import forward_status

    services = request.app[SERVICES]
    service = services.forwarding
    runtime = service.runtime() if service is not None else None
    forwarder = service.forwarder if service is not None else None
    policy = forwarder.policy if forwarder is not None else RetryPolicy()

    def read(conn: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        return forward_status(conn, runtime), [asdict(d) for d in dead_letters(conn, limit=200)]

    status, dead = await services.writer.read(read)
    schedule = [policy.ceiling(attempt) for attempt in range(10)]
    return web.json_response(
        {
            "status": status,
            "retry": {
                "ceilings_s": schedule,
                "max_delay_s": policy.max_delay,
                "note": "each wait is random up to its ceiling (full jitter)",
            },
            "dead_letters": dead,
        }
    )


async def requeue(request: web.Request) -> web.Response:
    from mplp_lsp.forward.outbox import requeue_named

    body = await _body(request)
    seqs = body.get("seqs")
    every = body.get("all") is True
    if not every and (
        not isinstance(seqs, list) or not all(isinstance(s, int) and s > 0 for s in seqs)
    ):
        raise _Refused("seqs", 'send {"seqs": [seq, ...]} or {"all": true}')
    sink = body.get("sink")
    if sink is not None and not isinstance(sink, str):
        raise _Refused("sink", "sink is a sink's name (collector, otlp), or absent for every sink")
    chosen = None if every else seqs
    moved, _ = await request.app[SERVICES].writer.run(
        lambda conn: requeue_named(conn, chosen, sink=sink)
    )
    return web.json_response({"requeued": moved})


async def _body(request: web.Request) -> dict[str, Any]:
    if request.content_type != "application/json":
        raise _Refused("", "send the body as application/json", 415)
    try:
        body = json.loads(await request.read())
    except ValueError:
        raise _Refused("", "the body is not JSON") from None
    if not isinstance(body, dict):
        raise _Refused("", "the body must be a JSON object")
    return body


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ROUTES: Final[tuple[tuple[str, str, Handler], ...]] = (
    ("GET", "/ui/api/timeline", timeline_buckets),
    ("GET", "/ui/api/timeline/events", timeline_events),
    ("GET", "/ui/api/export", export),
    ("GET", "/ui/api/live", live),
    ("GET", "/ui/api/graph", graph),
    ("GET", "/ui/api/drift", drift_list),
    ("POST", "/ui/api/drift/resolve", drift_resolve),
    ("GET", "/ui/api/forwarding", forwarding),
    ("POST", "/ui/api/dead-letters/requeue", requeue),
)


@web.middleware
async def _refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except _Refused as refused:
        return refused.response


def add_local_ui(app: web.Application, services: ApiServices) -> None:
    """The local dashboard's page and data routes on the daemon's API application."""
    from mplp_lsp.api.dashboard_shell import add_page_routes, add_shell

    app[SERVICES] = services
    app[CLOSING] = asyncio.Event()

    async def stop_streams(app: web.Application) -> None:
        app[CLOSING].set()

    app.on_shutdown.append(stop_streams)
    app.middlewares.append(_refusals)
    add_shell(app, "local.html")
    add_page_routes(app, ROUTES)

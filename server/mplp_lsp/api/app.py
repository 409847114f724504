"""The API's routes. Each handler parses the request and calls one core operation."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from functools import cache, partial
from importlib import resources
from typing import Any

from aiohttp import web

from mplp_lsp import __version__
from mplp_lsp.api.errors import error_response, result_response
from mplp_lsp.api.security import BODY_TIMEOUT, MAX_BODY, guard
from mplp_lsp.api.services import ApiServices
from mplp_lsp.api.streaming import streamed
from mplp_lsp.engine.intake import Outcome, Submission
from mplp_lsp.graph.changes import WriteResult
from mplp_lsp.graph.integrity import Rejected
from mplp_lsp.plans.runs import PlanRunResult, RunProgress, parse_request
from mplp_lsp.protocol import json_input
from mplp_lsp.protocol.kinds import STORED_KINDS, Kind
from mplp_lsp.protocol.result import ErrorCode, ValidationResult
from mplp_lsp.store.disk_full import MESSAGE as DISK_FULL
from mplp_lsp.store.disk_full import FullDiskEpisodes, is_disk_full
from mplp_lsp.store.events import EventLog

log = logging.getLogger(__name__)

_UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_INTEGRATION_KINDS = {"file": Kind.FILE_UPDATE, "git": Kind.GIT, "ci": Kind.CI, "tool": Kind.TOOL}
_EVENT_KINDS = frozenset(STORED_KINDS)
EVENTS_LIMIT = 1000


SERVICES = web.AppKey("services", ApiServices)
DISK = web.AppKey("disk", FullDiskEpisodes)


class _BadRequest(Exception):
    def __init__(self, status: int, path: str, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.result = ValidationResult.single(path, code, message)
        self.response = error_response(status, path, code, message)


def _id(request: web.Request, name: str) -> str:
    value = request.match_info[name]
    if not _UUID4.fullmatch(value):
        raise _BadRequest(422, name, ErrorCode.PATTERN, f"{name} must be a lowercase UUID v4")
    return value


async def _json(request: web.Request) -> Any:
    if request.content_type != "application/json":
        raise _BadRequest(
            415, "", ErrorCode.UNSUPPORTED_MEDIA_TYPE, "send the body as application/json"
        )
    try:
        async with asyncio.timeout(BODY_TIMEOUT):
            raw = await request.read()
    except TimeoutError:
        raise _BadRequest(
            408, "", ErrorCode.REQUEST_TIMEOUT, f"the body did not arrive in {BODY_TIMEOUT:g} s"
        ) from None
    try:
        return json_input.loads(raw)
    except json_input.JsonRejected as rejected:
        raise _BadRequest(422, "", rejected.code, f"the body: {rejected.message}") from None


def _services(request: web.Request) -> ApiServices:
    return request.app[SERVICES]


async def _graph(write: Awaitable[WriteResult], status: int = 200) -> web.Response:
    try:
        outcome = await write
    except Rejected as rejected:
        return result_response(rejected.result)
    return web.json_response(outcome.value, status=status)


def _found(value: dict[str, Any] | None, name: str, wanted: str) -> web.Response:
    if value is None:
        return error_response(404, name, ErrorCode.NOT_FOUND, f"no {name.split('_')[0]} {wanted}")
    return web.json_response(value)


# --- handlers ------------------------------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "version": __version__})


async def live_status(request: web.Request) -> web.Response:
    report = await _services(request).status()
    return web.json_response(report.to_json())


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def integration(request: web.Request) -> web.Response:
    name = request.match_info["kind"]
    kind = _INTEGRATION_KINDS.get(name)
    if kind is None:
        return error_response(404, "kind", ErrorCode.NOT_FOUND, f"no integration kind {name!r}")
    try:
        data = await _json(request)
    except _BadRequest as bad:  # an event that could not be read is a rejected event too
        await _services(request).intake.reject(Submission(kind, None, "http"), bad.result)
        raise
    result = await _services(request).intake.submit(Submission(kind, data, "http"))
    if result.outcome is Outcome.REJECTED:
        return result_response(result.result, 422)
    body: dict[str, Any] = {"ok": True, "outcome": result.outcome.value}
    if result.event is not None:
        body["event_id"] = result.event.event_id
        body["seq"] = result.event.seq
    return web.json_response(body, status=202 if result.accepted else 200)


async def create_context(request: web.Request) -> web.Response:
    return await _graph(_services(request).psg.create_context(await _json(request)), 201)


async def get_context(request: web.Request) -> web.Response:
    context_id = _id(request, "context_id")
    return _found(await _services(request).psg.get_context(context_id), "context_id", context_id)


async def create_plan(request: web.Request) -> web.Response:
    return await _graph(_services(request).psg.create_plan(await _json(request)), 201)


async def get_plan(request: web.Request) -> web.Response:
    plan_id = _id(request, "plan_id")
    return _found(await _services(request).psg.get_plan(plan_id), "plan_id", plan_id)


def _status_change(body: Any) -> tuple[Any, str | None]:
    if not isinstance(body, dict) or "status" not in body:
        raise _BadRequest(422, "status", ErrorCode.REQUIRED, 'send {"status": "..."}')
    extra = set(body) - {"status", "timestamp"}
    if extra:
        name = sorted(extra)[0]
        raise _BadRequest(422, name, ErrorCode.EXTRA_FORBIDDEN, f"{name} is not allowed here")
    at = body.get("timestamp")
    if at is not None and not isinstance(at, str):
        raise _BadRequest(422, "timestamp", ErrorCode.TYPE, "timestamp must be a date-time string")
    return body["status"], at


async def plan_status(request: web.Request) -> web.Response:
    plan_id = _id(request, "plan_id")
    status, at = _status_change(await _json(request))
    return await _graph(_services(request).psg.set_plan_status(plan_id, status, at))


async def step_status(request: web.Request) -> web.Response:
    plan_id, step_id = _id(request, "plan_id"), _id(request, "step_id")
    status, at = _status_change(await _json(request))
    return await _graph(_services(request).psg.set_step_status(plan_id, step_id, status, at))


async def create_confirm(request: web.Request) -> web.Response:
    return await _graph(_services(request).psg.create_confirm(await _json(request)), 201)


async def get_confirm(request: web.Request) -> web.Response:
    confirm_id = _id(request, "confirm_id")
    return _found(await _services(request).psg.get_confirm(confirm_id), "confirm_id", confirm_id)


async def decide_confirm(request: web.Request) -> web.Response:
    confirm_id = _id(request, "confirm_id")
    decision = await _json(request)
    return await _graph(_services(request).psg.decide_confirm(confirm_id, decision), 201)


async def create_trace(request: web.Request) -> web.Response:
    return await _graph(_services(request).psg.create_trace(await _json(request)), 201)


async def get_trace(request: web.Request) -> web.Response:
    trace_id = _id(request, "trace_id")
    return _found(await _services(request).psg.get_trace(trace_id), "trace_id", trace_id)


async def append_segments(request: web.Request) -> web.Response:
    trace_id = _id(request, "trace_id")
    body = await _json(request)
    segments = body.get("segments") if isinstance(body, dict) else None
    return await _graph(_services(request).psg.append_segments(trace_id, segments), 201)


async def edit_segment(request: web.Request) -> web.Response:
    trace_id, segment_id = _id(request, "trace_id"), _id(request, "segment_id")
    return await _graph(_services(request).psg.edit_segment(trace_id, segment_id))


async def run_plan(request: web.Request) -> web.StreamResponse:
    """Run a plan in the daemon; a refusal before anything is written is a 4xx ValidationResult.

    Once the run has stored its first event the answer is a 200 NDJSON stream: one
    ``{"event": {seq, kind, envelope}}`` line per event the run stored, as it commits, and a
    last line ``{"result": {success, execution, error}}`` or ``{"refused": ValidationResult}``.
    """
    plan_id = _id(request, "plan_id")
    run = parse_request(await _json(request), plan_id)
    if isinstance(run, ValidationResult):
        return result_response(run)
    progress = _services(request).plans.stream(run, plan_id)
    item = await anext(progress)
    if isinstance(item, PlanRunResult) and item.refused is not None:
        return result_response(item.refused)
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    # A client that leaves frees this handler at once; the run goes on in its own task.
    return await streamed(request, response, partial(_run_lines, item, progress))


async def _run_lines(
    first: RunProgress, progress: AsyncIterator[RunProgress], response: web.StreamResponse
) -> None:
    """One NDJSON line per stored event as the run commits it, then its result."""
    item = first
    while True:
        lines = (
            [item.to_json()]
            if isinstance(item, PlanRunResult)
            else [{"event": event.to_json()} for event in item]
        )
        await response.write("".join(json.dumps(line) + "\n" for line in lines).encode())
        if isinstance(item, PlanRunResult):
            await response.write_eof()
            return
        item = await anext(progress)


def _int_param(request: web.Request, name: str, low: int, high: int | None = None) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < low or (high is not None and int(raw) > high):
        bound = f" and at most {high}" if high is not None else ""
        raise _BadRequest(
            422, name, ErrorCode.INVALID_PARAMETER, f"{name} must be an integer >= {low}{bound}"
        )
    return int(raw)


async def events(request: web.Request) -> web.Response:
    kinds: Collection[str] | None = request.query.getall("kind", None)
    if kinds is not None:
        unknown = sorted(set(kinds) - _EVENT_KINDS)
        if unknown:
            raise _BadRequest(
                422, "kind", ErrorCode.INVALID_PARAMETER, f"unknown kind {unknown[0]!r}"
            )
    since = request.query.get("since")
    after = _int_param(request, "after", 0)
    limit = _int_param(request, "limit", 0, EVENTS_LIMIT) or EVENTS_LIMIT
    try:
        found = await _services(request).writer.read(
            lambda conn: EventLog(conn).query(
                kinds=kinds, since=since, after_seq=after, limit=limit
            )
        )
    except ValueError:
        raise _BadRequest(
            422, "since", ErrorCode.INVALID_PARAMETER, "since must be an RFC 3339 date-time"
        ) from None
    return web.json_response(
        {
            "events": [e.to_json() for e in found],
            "next_after": found[-1].seq if found else after,
        }
    )


# --- the application -----------------------------------------------------------------------

ROUTES: tuple[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]], ...] = (
    ("GET", "/health", health),
    ("GET", "/status", live_status),
    ("GET", "/openapi.json", openapi),
    ("POST", "/integration/{kind}", integration),
    ("POST", "/psg/contexts", create_context),
    ("GET", "/psg/contexts/{context_id}", get_context),
    ("POST", "/psg/plans", create_plan),
    ("GET", "/psg/plans/{plan_id}", get_plan),
    ("PATCH", "/psg/plans/{plan_id}/status", plan_status),
    ("PATCH", "/psg/plans/{plan_id}/steps/{step_id}/status", step_status),
    ("POST", "/psg/plans/{plan_id}/run", run_plan),
    ("POST", "/psg/confirms", create_confirm),
    ("GET", "/psg/confirms/{confirm_id}", get_confirm),
    ("POST", "/psg/confirms/{confirm_id}/decisions", decide_confirm),
    ("POST", "/psg/traces", create_trace),
    ("GET", "/psg/traces/{trace_id}", get_trace),
    ("POST", "/psg/traces/{trace_id}/segments", append_segments),
    ("PATCH", "/psg/traces/{trace_id}/segments/{segment_id}", edit_segment),
    ("PUT", "/psg/traces/{trace_id}/segments/{segment_id}", edit_segment),
    ("DELETE", "/psg/traces/{trace_id}/segments/{segment_id}", edit_segment),
    ("GET", "/events", events),
)


@web.middleware
async def _full_disk(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """A full disk wherever a write met it: 507 ``storage_full``, logged once per episode."""
    disk = request.app[DISK]
    try:
        response = await handler(request)
    except Exception as error:
        if not is_disk_full(error):
            raise
        disk.refused_one(error)
        return error_response(507, "", ErrorCode.STORAGE_FULL, DISK_FULL)
    else:
        if request.method != "GET" and response.status < 300:
            disk.stored()
        return response


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """aiohttp's own refusals and the handlers' early exits, as ValidationResult bodies."""
    try:
        return await handler(request)
    except _BadRequest as bad:
        return bad.response
    except web.HTTPRequestEntityTooLarge:
        return error_response(413, "", ErrorCode.BODY_TOO_LARGE, "the body is too large")
    except web.HTTPNotFound:
        return error_response(404, "", ErrorCode.NOT_FOUND, f"no route {request.path}")
    except web.HTTPMethodNotAllowed as error:
        response = error_response(
            405, "", ErrorCode.METHOD_NOT_ALLOWED, f"{request.method} is not allowed here"
        )
        response.headers["Allow"] = ",".join(sorted(error.allowed_methods))
        return response


def build_app(
    services: ApiServices,
    token: str,
    hosts: Callable[[], Collection[str]],
    *,
    max_body: int = MAX_BODY,
) -> web.Application:
    from mplp_lsp.api import dashboard_shell
    from mplp_lsp.api.dashboard import add_local_ui

    # The guard runs first: nothing, not even a 404, is told to an unauthenticated client.
    authorized = guard(
        token,
        hosts,
        max_body,
        session=dashboard_shell.page_session,
        is_open=dashboard_shell.is_open,
    )
    app = web.Application(
        middlewares=[authorized, _full_disk, _errors],
        client_max_size=max_body,
    )
    dashboard_shell.protect(app)
    app[SERVICES] = services
    app[DISK] = FullDiskEpisodes(log, "HTTP API")
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    add_local_ui(app, services)
    return app


@cache
def _openapi_text() -> str:
    return resources.files("mplp_lsp.api").joinpath("openapi.json").read_text(encoding="utf-8")


def openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_openapi_text())
    return document

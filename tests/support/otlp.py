"""A real OTLP/HTTP logs receiver on 127.0.0.1 that decodes with the official
``opentelemetry-proto`` messages (protobuf and JSON, gzip or not), records every log record,
and answers as a test scripts it (partial success, 503 with Retry-After, ...)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from tests.support.collector import free_port


@dataclass
class Record:
    """One log record as received: its envelope (the body), attributes, event name and
    times, and its resource's attributes."""

    envelope: dict[str, Any]
    attributes: dict[str, Any]
    event_name: str
    time_unix_nano: int
    observed_time_unix_nano: int
    resource: dict[str, Any]


# (request number, its records) -> (status, headers, records to reject from this request)
Respond = Callable[[int, list[Record]], tuple[int, dict[str, str], int]]


@dataclass
class Receiver:
    respond: Respond | None = None  # None: answer every request with ``status``
    status: int = 200
    records: list[Record] = field(default_factory=list)  # accepted, in arrival order
    rejected: list[Record] = field(default_factory=list)
    requests: int = 0
    content_types: set[str] = field(default_factory=set)
    encodings: set[str] = field(default_factory=set)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self, port: int | None = None) -> Receiver:
        app = web.Application()
        app.router.add_post("/v1/logs", self._logs)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        chosen = port or free_port()
        await web.TCPSite(self._runner, "127.0.0.1", chosen).start()
        self.url = f"http://127.0.0.1:{chosen}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _logs(self, request: web.Request) -> web.Response:
        raw = await request.read()  # aiohttp inflates a gzip body (Content-Encoding) itself
        self.encodings.add(request.headers.get("Content-Encoding", "identity"))
        content_type = request.content_type
        self.content_types.add(content_type)
        message = ExportLogsServiceRequest()
        if content_type == "application/x-protobuf":
            message.ParseFromString(raw)
        else:
            json_format.Parse(raw.decode(), message)
        records = list(_records(message))
        self.requests += 1
        status, headers, reject = (
            (self.status, {}, 0) if self.respond is None else self.respond(self.requests, records)
        )
        if not 200 <= status < 300:
            return web.Response(status=status, headers=headers, text="scripted refusal")
        kept = records[: len(records) - reject] if reject else records
        self.records += kept
        self.rejected += records[len(kept) :]
        answer = ExportLogsServiceResponse()
        if reject:
            answer.partial_success.rejected_log_records = reject
            answer.partial_success.error_message = "scripted rejection"
        if content_type == "application/x-protobuf":
            body = answer.SerializeToString()
        else:
            body = json_format.MessageToJson(answer).encode()
        return web.Response(status=status, headers=headers, body=body, content_type=content_type)

    def event_ids(self) -> list[str]:
        return [record.envelope["event_id"] for record in self.records]


def _records(message: ExportLogsServiceRequest) -> Any:
    for resource_logs in message.resource_logs:
        resource = {kv.key: _value(kv.value) for kv in resource_logs.resource.attributes}
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                yield Record(
                    envelope=json.loads(record.body.string_value),
                    attributes={kv.key: _value(kv.value) for kv in record.attributes},
                    event_name=record.event_name,
                    time_unix_nano=record.time_unix_nano,
                    observed_time_unix_nano=record.observed_time_unix_nano,
                    resource=resource,
                )


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


@contextmanager
def receiving_in_a_thread(respond: Respond | None = None) -> Iterator[Receiver]:
    """A :class:`Receiver` on an event loop of its own thread, for a test that waits on real
    processes with blocking calls."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="otlp-receiver", daemon=True)
    thread.start()
    receiver = Receiver(respond)
    asyncio.run_coroutine_threadsafe(receiver.start(), loop).result(30)
    try:
        yield receiver
    finally:
        asyncio.run_coroutine_threadsafe(receiver.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()

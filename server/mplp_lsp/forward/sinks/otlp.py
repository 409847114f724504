"""The OTLP/HTTP logs sink: every envelope as a log record to ``<url>/v1/logs``
(docs/forwarding.md#opentelemetry), for an OpenTelemetry Collector or any OTLP receiver.

Encodings: OTLP/JSON (always available) or binary protobuf (``application/x-protobuf``,
through the official ``opentelemetry-proto`` messages: the ``otlp`` extra), gzip or not.
Answers, per the OTLP/HTTP specification: a 2xx is delivered, unless its
``partialSuccess`` counts rejected records: all of the batch, and they are dead letters
with the receiver's message; some, and the batch is acknowledged with the count kept (the
receiver does not say which, and the OTLP client must not retry a partial success). 429,
502, 503 and 504 are retried after the backoff, at least the ``Retry-After``; a 400 or 413
for a batch of several is split to isolate the culprit; every other status is not retried:
the envelopes are dead letters, which ``mplp-lsp outbox requeue`` can send again.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from mplp_lsp import __version__
from mplp_lsp.forward.batching import Batch
from mplp_lsp.forward.outbox import Backlog, Entry
from mplp_lsp.forward.retry import Action
from mplp_lsp.forward.sinks.kind import Stream, Verdict, http_reason
from mplp_lsp.forward.sinks.otlp_records import logs_request
from mplp_lsp.forward.transport import Reply

__all__ = ["LOGS_PATH", "OTLP", "OtlpSink", "ProtobufMissing", "resource_attributes"]

OTLP: Final = "otlp"
LOGS_PATH: Final = "/v1/logs"
SERVICE_NAME: Final = "mplp-lsp"
_RETRY: Final = frozenset({429, 502, 503, 504})
_SPLITTABLE: Final = frozenset({400, 413})
_JSON: Final = "application/json"
_PROTOBUF: Final = "application/x-protobuf"


class ProtobufMissing(RuntimeError):
    """``otlpEncoding: protobuf`` without the ``opentelemetry-proto`` package."""


def resource_attributes(stream: str, origin: str | None, host_name: str | None) -> dict[str, str]:
    """Who sends: the daemon (``service.*``), this store's stream (``service.instance.id``),
    the workspace's origin hash, and the host name only when the user allows it."""
    found = {
        "service.name": SERVICE_NAME,
        "service.version": __version__,
        "service.instance.id": stream,
    }
    if origin:
        found["mplp.workspace.origin"] = origin
    if host_name:
        found["host.name"] = host_name
    return found


class OtlpSink:
    name = OTLP

    def __init__(
        self,
        *,
        encoding: str = "json",
        compression: str = "gzip",
        origin: str | None = None,
        host_name: str | None = None,
    ) -> None:
        if encoding == "protobuf":
            _protobuf()  # refuse at start, not at the first batch
        self._encoding = encoding
        self._gzip = compression == "gzip"
        self._origin = origin
        self._host_name = host_name

    def endpoint(self, base_url: str) -> str:
        return base_url.rstrip("/") + LOGS_PATH

    def report_endpoint(self, base_url: str) -> str | None:
        return None  # an OTLP receiver knows nothing of streams

    def encode(self, stream: Stream, entries: Sequence[Entry], backlog: Backlog | None) -> Batch:
        if not entries:
            raise ValueError("a batch needs at least one entry")
        request = logs_request(
            entries, resource_attributes(stream.id, self._origin, self._host_name)
        )
        if self._encoding == "protobuf":
            body, content_type = _to_protobuf(request), _PROTOBUF
        else:
            body, content_type = json.dumps(request, separators=(",", ":")).encode(), _JSON
        headers = {"Content-Type": content_type}
        if self._gzip:
            body = gzip.compress(body, compresslevel=5, mtime=0)
            headers["Content-Encoding"] = "gzip"
        return Batch(tuple(entries), body, headers)

    def classify(self, reply: Reply, batch: Batch) -> Verdict:
        status, size = reply.status, len(batch.entries)
        if 200 <= status < 300:
            rejected, message = _partial_success(reply)
            if rejected <= 0:
                return Verdict(Action.DELIVERED)
            reason = f"the receiver rejected {min(rejected, size)} of {size} log records"
            reason += f": {message}" if message else ""
            if rejected >= size:
                return Verdict(Action.DEAD, f"HTTP {status}: {reason}")
            return Verdict(Action.DELIVERED, reason, rejected=rejected)
        if status in _RETRY:
            return Verdict(Action.RETRY, http_reason(reply), retry_after=reply.retry_after)
        if status in _SPLITTABLE and size > 1:
            return Verdict(Action.SPLIT, http_reason(reply))
        return Verdict(Action.DEAD, http_reason(reply))


def _partial_success(reply: Reply) -> tuple[int, str]:
    """``partialSuccess.rejectedLogRecords`` and its message; (0, "") when absent or not
    readable (a receiver's 2xx is its acceptance)."""
    if not reply.body:
        return 0, ""
    found: Any
    if reply.content_type.startswith(_PROTOBUF):
        try:
            found = _from_protobuf(reply.body)
        except (ProtobufMissing, ValueError):
            return 0, ""
    else:
        try:
            found = json.loads(reply.body)
        except ValueError:
            return 0, ""
    partial = found.get("partialSuccess") if isinstance(found, dict) else None
    if not isinstance(partial, Mapping):
        return 0, ""
    try:
        rejected = int(partial.get("rejectedLogRecords") or 0)
    except (TypeError, ValueError):
        return 0, ""
    message = partial.get("errorMessage")
    return rejected, str(message)[:300] if message else ""


def _protobuf() -> Any:
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
    except ImportError:
        raise ProtobufMissing(
            "otlpEncoding protobuf needs the opentelemetry-proto package:"
            " pip install 'mplp-lsp[otlp]', or set otlpEncoding to json"
        ) from None
    return json_format, logs_service_pb2


def _to_protobuf(request: dict[str, Any]) -> bytes:
    """The OTLP/JSON request (:func:`logs_request`) as the same protobuf message.

    Built field by field: protobuf's ``json_format.ParseDict`` walks the message's
    descriptors in Python, about 0.3 s per 1,000 records, ten times the rest of a batch.
    A unit test holds this to what ParseDict makes of the same request."""
    _, service = _protobuf()
    message = service.ExportLogsServiceRequest()
    for resource_logs in request["resourceLogs"]:
        into = message.resource_logs.add()
        _add_key_values(into.resource.attributes, resource_logs["resource"]["attributes"])
        for scope_logs in resource_logs["scopeLogs"]:
            scope = into.scope_logs.add()
            scope.scope.name = scope_logs["scope"]["name"]
            scope.scope.version = scope_logs["scope"]["version"]
            for record in scope_logs["logRecords"]:
                _add_record(scope.log_records.add(), record)
    return bytes(message.SerializeToString())


def _add_record(into: Any, record: Mapping[str, Any]) -> None:
    into.severity_number = record["severityNumber"]
    into.severity_text = record["severityText"]
    into.body.string_value = record["body"]["stringValue"]
    into.event_name = record["eventName"]
    if "timeUnixNano" in record:
        into.time_unix_nano = int(record["timeUnixNano"])
    if "observedTimeUnixNano" in record:
        into.observed_time_unix_nano = int(record["observedTimeUnixNano"])
    _add_key_values(into.attributes, record["attributes"])


# The AnyValue fields of the values otlp_records writes (its _any_value), in OTLP/JSON.
_VALUE_FIELDS: Final = {
    "stringValue": ("string_value", str),
    "boolValue": ("bool_value", bool),
    "intValue": ("int_value", int),
    "doubleValue": ("double_value", float),
}


def _add_key_values(into: Any, values: Sequence[Mapping[str, Any]]) -> None:
    for pair in values:
        item = into.add()
        item.key = pair["key"]
        [(name, value)] = pair["value"].items()
        field, convert = _VALUE_FIELDS[name]
        setattr(item.value, field, convert(value))


def _from_protobuf(body: bytes) -> dict[str, Any]:
    json_format, service = _protobuf()
    response = service.ExportLogsServiceResponse()
    try:
        response.ParseFromString(body)
    except Exception as error:  # protobuf's DecodeError: the answer is not one
        raise ValueError(str(error)) from None
    found: dict[str, Any] = json_format.MessageToDict(response)
    return found

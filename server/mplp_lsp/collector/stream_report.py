"""What a forwarder reports of its stream on its own schedule (``POST /streams/report``).

A batch carries its outbox's backlog in headers, but a forwarder that has nothing to send,
or cannot get its batches through, sends none. So the forwarder also reports, at start and
then every ``forwardReportS`` seconds in which no batch was acknowledged, a small JSON body:

    {"source": "<stream>", "backlog": 12, "backlog_oldest": "2026-...Z" | null,
     "origin": "<hash of machine and store>", "machine": "<host name>",
     "author_name": "...", "author_email": "...", "previous_stream": "<stream>" | null}

``backlog`` is the whole outbox (what is in flight included), ``origin`` identifies the
store's place on its machine (a new stream from the same origin replaces the older ones:
a salvaged or recreated store), ``author_*`` is the workstation's configured git author
(its address as the daemon's ``gitAuthorEmail`` policy sends it), which its file activity
is attributed to, and ``previous_stream`` the stream a salvage ended. Only ``source`` and
``backlog`` are required. No aiohttp here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

__all__ = ["REPORT_PATH", "ReportRejected", "StreamReport", "parse_report"]

REPORT_PATH: Final = "/streams/report"
_MAX_TEXT: Final = 512
_MAX_BACKLOG: Final = 10**15
_TEXTS: Final = ("origin", "machine", "author_name", "author_email", "previous_stream")


class ReportRejected(ValueError):
    """The report is not one (a 400 with this message)."""


@dataclass(frozen=True, slots=True)
class StreamReport:
    stream: str
    backlog: int
    backlog_oldest: datetime | None
    origin: str | None = None
    machine: str | None = None
    author_name: str | None = None
    author_email: str | None = None
    previous_stream: str | None = None


def parse_report(report: Any) -> StreamReport:
    """The report in a parsed JSON body, or :class:`ReportRejected`."""
    if not isinstance(report, Mapping):
        raise ReportRejected("expected a JSON object")
    stream = report.get("source")
    if not isinstance(stream, str) or not stream or len(stream) > _MAX_TEXT:
        raise ReportRejected("source must be the stream id")
    backlog = report.get("backlog")
    if isinstance(backlog, bool) or not isinstance(backlog, int) or not 0 <= backlog < _MAX_BACKLOG:
        raise ReportRejected("backlog must be a count")
    texts = {name: _text(report, name) for name in _TEXTS}
    return StreamReport(stream, backlog, _moment(report.get("backlog_oldest")), **texts)


def _text(report: Mapping[str, Any], name: str) -> str | None:
    value = report.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise ReportRejected(f"{name} must be a string of at most {_MAX_TEXT} characters")
    return value.strip() or None


def _moment(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ReportRejected("backlog_oldest must be an RFC 3339 time or null")
    try:
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise ReportRejected("backlog_oldest must be an RFC 3339 time or null") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

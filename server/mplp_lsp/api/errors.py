"""Every API error is a ValidationResult body with a fitting 4xx status."""

from __future__ import annotations

from aiohttp import web

from mplp_lsp.protocol.result import ErrorCode, ValidationResult

# Codes that say "the request conflicts with the graph's current state" rather than
# "the request is malformed": a client may re-read and retry these.
_CONFLICT = frozenset(
    {
        ErrorCode.TRANSITION_FORBIDDEN,
        ErrorCode.TRANSITION_FROM_TERMINAL,
        ErrorCode.TRANSITION_PRECONDITION,
        ErrorCode.STALE_CHANGE,
        ErrorCode.DUPLICATE_ID,
        ErrorCode.TRACE_SEGMENT_IMMUTABLE,
    }
)


def status_for(result: ValidationResult) -> int:
    codes = set(result.codes)
    if ErrorCode.NOT_FOUND in codes:
        return 404
    if codes & _CONFLICT:
        return 409
    return 422


def result_response(result: ValidationResult, status: int | None = None) -> web.Response:
    return web.json_response(result.to_dict(), status=status or status_for(result))


def error_response(status: int, path: str, code: ErrorCode, message: str) -> web.Response:
    return result_response(ValidationResult.single(path, code, message), status)

"""Untrusted JSON text to Python values, with every way it can fail as a stable code.

``json.loads`` alone turns hostile input into exceptions nobody expects: 200,000 nested
brackets raise RecursionError, a 100,000-digit integer a ValueError about integer string
conversion, ``1e400`` silently becomes infinity (which no later ``dumps`` may write), and a
body in UTF-16 is accepted by its byte-order guess. Here the text must be UTF-8, numbers
must be finite, ``NaN``/``Infinity`` are not JSON, and nesting deeper than
:data:`MAX_DEPTH` is refused after parsing, so schema validation, redaction and storage,
which recurse, never meet a structure that would exhaust the stack.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any, Final

from mplp_lsp.protocol.result import ErrorCode, ValidationResult, format_path

# MPLP objects nest a handful of levels; a PSG context's free-form fields a few more.
MAX_DEPTH: Final = 64
# A tuple, not ``dict | list``: isinstance against a tuple is about a third faster.
_CONTAINERS: Final = (dict, list)


class JsonRejected(ValueError):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_result(self, path: str = "") -> ValidationResult:
        return ValidationResult.single(path, self.code, self.message)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]}… is too large to represent")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def text_of(raw: bytes | str) -> str:
    """``raw`` as text; bytes must be UTF-8 (``invalid_json`` otherwise)."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonRejected(
            ErrorCode.INVALID_JSON, f"not UTF-8: byte {error.start} is invalid"
        ) from None


def loads(raw: bytes | str) -> Any:
    """The JSON value of ``raw``; :class:`JsonRejected` (``invalid_json`` or
    ``nesting_too_deep``) for anything else."""
    try:
        value = json.loads(text_of(raw), parse_float=_finite, parse_constant=_constant)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as error:
        message = f"not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        raise JsonRejected(ErrorCode.INVALID_JSON, message) from None
    except ValueError as error:  # an integer of more than 4300 digits, a number too large
        raise JsonRejected(ErrorCode.INVALID_JSON, f"not JSON: {str(error)[:200]}") from None
    check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_DEPTH, *, checked: Collection[int] = ()) -> None:
    """Refuse ``value`` if its containers nest deeper than ``limit`` (no recursion).

    Level by level: one comprehension per nesting level instead of a stack entry per
    container, which the collector's intake runs on every envelope of every batch.
    ``checked`` holds the ids of containers the caller has already found shallow enough
    where they are (the collector's plain file envelopes): they are not walked.
    """
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 1
    while level:
        deeper = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, _CONTAINERS) and id(child) not in checked
        ]
        if deeper and depth >= limit:
            raise _too_deep(limit)
        level = deeper
        depth += 1


def _too_deep(limit: int = MAX_DEPTH) -> JsonRejected:
    return JsonRejected(ErrorCode.NESTING_TOO_DEEP, f"nested deeper than {limit} levels")


def lone_surrogate_at(value: Any) -> str | None:
    """Where ``value`` holds a string (a key or a value) with a lone surrogate, the first
    found (``a.b[0]``); None if it holds none.

    ``json.loads`` reads ``"\\ud800"`` into one, and ``os.fsdecode`` makes them of bytes that
    are not UTF-8: such text has no UTF-8 form, so it can be neither stored nor sent. Walked
    only once encoding has failed, to say where.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not has_utf8_form(item):
                return format_path(path)
        elif isinstance(item, dict):
            for key, child in item.items():
                where = (*path, str(key))
                if isinstance(key, str) and not has_utf8_form(key):
                    return format_path(where)
                stack.append((child, where))
        elif isinstance(item, list | tuple):
            stack.extend((child, (*path, index)) for index, child in enumerate(item))
    return None


def has_utf8_form(text: str) -> bool:
    """Whether ``text`` holds no lone surrogate (has a UTF-8 form)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

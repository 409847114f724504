"""The VSL contract every backend implements, and the checks they share."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol


class VslError(Exception):
    """A VSL that cannot be opened or used as asked."""


class VslKeyError(VslError, ValueError):
    """A key that is not a non-empty string."""


class VslValueError(VslError, TypeError):
    """A value that is not a JSON value (NaN, bytes, objects, non-string keys, ...)."""


class ValueStateLayer(Protocol):
    async def get(self, key: str, default: Any = None) -> Any: ...

    async def set(self, key: str, value: Any) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[None]: ...

    async def close(self) -> None: ...


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise VslKeyError(f"a VSL key is a non-empty string, not {key!r}")
    return key


def encode(value: Any) -> str:
    """The stored form of a value; refuses anything JSON cannot carry exactly."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise VslValueError(f"a VSL value must be a JSON value: {exc}") from None
    _check_keys(value)
    return text


def _check_keys(value: Any) -> None:
    # json.dumps turns {1: x} into {"1": x}: a value that would not read back as written
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise VslValueError(f"a VSL value's object keys are strings, not {key!r}")
            _check_keys(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_keys(item)


def decode(text: str) -> Any:
    return json.loads(text)

"""A setting's value checked against its property in ``schemas/settings.schema.json``.

The schema is the one description of the settings (editors show it, users validate their
files with it), so the daemon checks values against the schema itself rather than against
a second description of the same rules. It uses a small part of draft-07: ``type``,
``enum``, ``minimum``/``maximum``, ``minLength``, ``pattern``, ``minItems``/``items`` and, for
objects,
``properties``/``required``/``additionalProperties``; a test holds this checker to
``jsonschema``'s verdicts on generated values. A checker this size costs nothing at start,
where a validation library costs tens of milliseconds and megabytes of every process (the
CLI reads the settings before it prints anything; a daemon keeps them all its life).

The strictness is JSON Schema's: ``true`` is not an integer, ``1.0`` is, ``"500"`` is not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["problem", "typed"]

_TYPE_NAMES: Final = {
    "integer": "integer",
    "number": "number",
    "string": "string",
    "boolean": "boolean",
    "array": "list",
    "object": "object",
    "null": "null",
}

# What a pattern of the schema means, in the words a user reads (the regex is not that).
_PATTERN_SAYS: Final = {r"^https?://[^\s/?#@]+": "not an http:// or https:// URL"}


def problem(value: Any, spec: Mapping[str, Any]) -> str | None:
    """Why ``value`` does not satisfy ``spec`` (a property of the schema), or None."""
    types = spec.get("type")
    allowed = [types] if isinstance(types, str) else list(types or [])
    if allowed and not any(_is(value, kind) for kind in allowed):
        wanted = " or ".join(_TYPE_NAMES[kind] for kind in allowed if kind != "null")
        return f"input should be a valid {wanted or 'null'}"
    if value is None:
        return None
    if "enum" in spec and not any(_equal(value, choice) for choice in spec["enum"]):
        return f"input should be {_choices(spec['enum'])}"
    if _is(value, "number"):
        if "minimum" in spec and value < spec["minimum"]:
            return f"input should be greater than or equal to {spec['minimum']}"
        if "maximum" in spec and value > spec["maximum"]:
            return f"input should be less than or equal to {spec['maximum']}"
    if isinstance(value, str) and len(value) < spec.get("minLength", 0):
        least = spec["minLength"]
        return f"string should have at least {least} character{'s' * (least != 1)}"
    # JSON Schema's pattern matches anywhere unless anchored (re.search, not re.match).
    if isinstance(value, str) and "pattern" in spec and not re.search(spec["pattern"], value):
        return _PATTERN_SAYS.get(spec["pattern"], f"string should match {spec['pattern']!r}")
    if isinstance(value, list | tuple):
        return _array_problem(value, spec)
    if isinstance(value, dict):
        return _object_problem(value, spec)
    return None


def typed(value: Any) -> Any:
    """A checked value in the model's types: lists as tuples (settings are frozen and
    hashable), integral floats as integers; objects keep their keys."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return tuple(typed(item) for item in value)
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    return value


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        if isinstance(value, float):
            return math.isfinite(value) and value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "object":
        return isinstance(value, dict)
    return kind == "null" and value is None


def _equal(value: Any, choice: Any) -> bool:
    # JSON's equality: true is not 1.
    return type(value) is type(choice) and bool(value == choice)


def _choices(options: list[Any]) -> str:
    shown = [repr(option) for option in options]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _array_problem(value: list[Any] | tuple[Any, ...], spec: Mapping[str, Any]) -> str | None:
    least = spec.get("minItems", 0)
    if len(value) < least:
        return f"list should have at least {least} item{'s' * (least != 1)}"
    items = spec.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            if (reason := problem(item, items)) is not None:
                return f"item {index}: {reason}"
    return None


def _object_problem(value: dict[Any, Any], spec: Mapping[str, Any]) -> str | None:
    properties: Mapping[str, Any] = spec.get("properties", {})
    extra = spec.get("additionalProperties", True)
    reasons: list[str] = []
    for name in spec.get("required", ()):
        if name not in value:
            reasons.append(f"{name}: field required")
    for key, item in value.items():
        if key in properties:
            reason = problem(item, properties[key])
        elif extra is False:
            reason = "extra inputs are not permitted"
        elif isinstance(extra, Mapping):
            reason = problem(item, extra)
        else:
            reason = None
        if reason is not None:
            reasons.append(f"{key}: {reason}")
    return "; ".join(reasons) or None

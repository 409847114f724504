"""The oracle: ``jsonschema`` over the schema files, which explains every error.

Imported only when some input fails the fast path (see :mod:`mplp_lsp.protocol.validator`):
valid input never needs it, and a daemon that has seen none keeps its memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from jsonschema import Draft7Validator, FormatChecker, ValidationError, validators
from referencing import Registry
from referencing.jsonschema import DRAFT7

from mplp_lsp.protocol.formats import FORMAT_CHECKS
from mplp_lsp.protocol.result import ErrorCode, ValidationIssue, format_path
from mplp_lsp.protocol.schemas import all_schema_documents

_CODES: dict[str, ErrorCode] = {
    "required": ErrorCode.REQUIRED,
    "type": ErrorCode.TYPE,
    "enum": ErrorCode.ENUM,
    "pattern": ErrorCode.PATTERN,
    "format": ErrorCode.FORMAT,
    "minLength": ErrorCode.MIN_LENGTH,
    "maxLength": ErrorCode.MAX_LENGTH,
    "minimum": ErrorCode.MINIMUM,
    "exclusiveMinimum": ErrorCode.MINIMUM,
    "maximum": ErrorCode.MAXIMUM,
    "exclusiveMaximum": ErrorCode.MAXIMUM,
    "additionalProperties": ErrorCode.EXTRA_FORBIDDEN,
    "minItems": ErrorCode.MIN_ITEMS,
    "maxItems": ErrorCode.MAX_ITEMS,
    "const": ErrorCode.CONST,
}
_MESSAGE_LIMIT = 200


# One error per missing or extra property, and ECMA-262 anchors.


def _required(
    validator: Any, required: list[str], instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for name in required:
        if name not in instance:
            yield ValidationError(f"{name} is required", path=[name])


_STANDARD_ADDITIONAL = Draft7Validator.VALIDATORS["additionalProperties"]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if allowed is not False:
        yield from _STANDARD_ADDITIONAL(validator, allowed, instance, schema)
        return
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    for name in instance:
        if name not in declared and not any(p.search(name) for p in patterns):
            yield ValidationError(f"{_short(name)} is not allowed here", path=[name])


@cache
def _ecma_regex(pattern: str) -> re.Pattern[str]:
    """JSON Schema patterns are ECMA-262: ``$`` ends the input; Python's admits a final newline."""
    return re.compile(re.sub(r"(?<!\\)\$", r"\\Z", pattern))


def _pattern(
    validator: Any, pattern: str, instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _ecma_regex(pattern).search(instance):
        yield ValidationError(f"does not match {pattern}")


_Oracle = validators.extend(
    Draft7Validator,
    {"required": _required, "additionalProperties": _additional_properties, "pattern": _pattern},
)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _issue(error: ValidationError) -> ValidationIssue:
    code = _CODES.get(str(error.validator), ErrorCode.UNKNOWN)
    path = format_path(list(error.absolute_path))
    value = error.validator_value
    if code is ErrorCode.TYPE:
        message = f"must be of type {value}, not {type(error.instance).__name__}"
    elif code is ErrorCode.ENUM:
        message = f"must be one of: {', '.join(map(str, value))}"
    elif code is ErrorCode.FORMAT:
        message = f"{_short(error.instance)} is not a valid {value}"
    elif code is ErrorCode.MIN_LENGTH:
        message = f"must be at least {value} character{'s' if value != 1 else ''} long"
    elif code is ErrorCode.MINIMUM:
        message = f"must be at least {value}"
    elif code is ErrorCode.CONST:
        message = f"must be {value!r}"
    else:
        message = error.message
    return ValidationIssue(path, str(code), message[:_MESSAGE_LIMIT])


def oracle_for(schema: dict[str, Any]) -> Any:
    """A jsonschema validator of ``schema`` (its ``$ref``s resolve against every file)."""
    registry, checker = _engines()
    return _Oracle(without_dialect(schema), registry=registry, format_checker=checker)


def issues(oracle: Any, data: Any) -> list[ValidationIssue]:
    """Every schema error in ``data``, one per (path, code)."""
    found: dict[tuple[str, str], ValidationIssue] = {}
    for error in oracle.iter_errors(data):
        issue = _issue(error)
        found.setdefault((issue.path, issue.code), issue)
    return list(found.values())


@cache
def _engines() -> tuple[Registry[Any], FormatChecker]:
    registry: Registry[Any] = Registry().with_resources(
        (uri, DRAFT7.create_resource(without_dialect(doc)))
        for uri, doc in all_schema_documents().items()
    )
    checker = FormatChecker(formats=())
    for name, check in FORMAT_CHECKS.items():
        checker.checks(name)(check)
    return registry, checker


def without_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    """jsonschema picks a validator class by ``$schema`` whenever it follows a ``$ref``,
    which would drop the oracle's keyword overrides; the class already fixes draft-07."""
    return {key: value for key, value in schema.items() if key != "$schema"}

"""Validation = JSON Schema + invariants, with one result shape for every caller.

Two schema engines, one verdict:

- the **oracle** is ``jsonschema`` over the schema files: normative, explains every error
  with a path and a code, but costs 150-350 µs per event;
- the **fast path** is ``jsonschema_rs`` compiled from the same files and handed the same
  format functions: 2-3 µs per event, used to accept valid input without the oracle.

Only input the fast path rejects (or cannot handle) goes to the oracle, which then says
why. A hypothesis test proves both accept and reject exactly the same inputs. Invariants
run on every input through the one engine in :mod:`mplp_lsp.protocol.invariants`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import jsonschema_rs
from jsonschema import Draft7Validator, FormatChecker, ValidationError, validators
from referencing import Registry
from referencing.jsonschema import DRAFT7

from mplp_lsp.protocol.formats import FORMAT_CHECKS
from mplp_lsp.protocol.invariants import InvariantSet
from mplp_lsp.protocol.kinds import (
    PAYLOAD_KINDS,
    SPEC_FAMILY,
    SPECS,
    UPSTREAM_FAMILY,
    Kind,
    kind_for_event_type,
)
from mplp_lsp.protocol.result import (
    ErrorCode,
    ValidationIssue,
    ValidationResult,
    format_path,
)
from mplp_lsp.protocol.schemas import all_schema_documents, load_json, schema_path

log = logging.getLogger(__name__)

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


# --- oracle keywords: one error per missing or extra property, ECMA-262 anchors -------------


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


# --- the validator -----------------------------------------------------------------------


class EventValidator:
    """Compiled once (at first use), then shared; thread-safe for concurrent reads."""

    def __init__(self) -> None:
        registry, fast_registry, checker = _engines()
        self._oracle: dict[Kind, Any] = {}
        self._fast: dict[Kind, Any] = {}
        for kind, spec in SPECS.items():
            schema = load_json(spec.schema)
            self._oracle[kind] = _Oracle(
                _without_dialect(schema), registry=registry, format_checker=checker
            )
            self._fast[kind] = jsonschema_rs.Draft7Validator(
                schema, formats=FORMAT_CHECKS, validate_formats=True, registry=fast_registry
            )
        self.integration_invariants = InvariantSet.load(
            schema_path("v2/invariants/integration-invariants.yaml")
        )
        self.observability_invariants = InvariantSet.load(
            schema_path("v2/invariants/observability-invariants.yaml")
        )

    # The two schema engines, exposed for the equivalence test and the benchmark.

    def fast_accepts(self, kind: Kind, data: Any) -> bool | None:
        """The fast path's verdict, or None when it cannot take this input."""
        try:
            return bool(self._fast[kind].is_valid(data))
        except Exception:  # e.g. a lone surrogate that cannot cross into Rust
            return None

    def oracle_issues(self, kind: Kind, data: Any) -> list[ValidationIssue]:
        issues: dict[tuple[str, str], ValidationIssue] = {}
        for error in self._oracle[kind].iter_errors(data):
            issue = _issue(error)
            issues.setdefault((issue.path, issue.code), issue)
        return list(issues.values())

    def invariant_issues(self, kind: Kind, data: Any) -> list[ValidationIssue]:
        if not isinstance(data, dict):
            return []
        if kind in PAYLOAD_KINDS:
            return self.integration_invariants.check(SPECS[kind].invariant_scope, data)
        issues = self.observability_invariants.check("event", _upstream_family(data))
        payload_kind = kind_for_event_type(data.get("event_type"))
        if (
            kind is Kind.ENVELOPE
            and payload_kind is not None
            and isinstance(data.get("payload"), dict)
        ):
            scope = SPECS[payload_kind].invariant_scope
            issues += self.integration_invariants.check(scope, data["payload"], prefix=("payload",))
        return issues

    def validate(self, kind: Kind, data: Any) -> ValidationResult:
        try:
            fast = self.fast_accepts(kind, data)
            schema_issues = [] if fast else self.oracle_issues(kind, data)
            if fast is False and not schema_issues:
                log.error("schema engines disagree on a %s input; rejecting it", kind)
                schema_issues = [
                    ValidationIssue(
                        "", str(ErrorCode.UNKNOWN), "input rejected by the fast validator"
                    )
                ]
            invariant_issues = self.invariant_issues(kind, data)
        except RecursionError:
            return ValidationResult.single("", ErrorCode.UNKNOWN, "input is nested too deeply")
        if not schema_issues and not invariant_issues:
            return ValidationResult.success()
        # A path the schema already faults is not reported again by an invariant.
        faulted = {issue.path for issue in schema_issues}
        extra = [issue for issue in invariant_issues if issue.path not in faulted]
        return ValidationResult.failure([*schema_issues, *extra])


@cache
def _engines() -> tuple[Registry[Any], Any, FormatChecker]:
    """Both engines' view of every schema file, and the format checks they share."""
    documents = all_schema_documents()
    registry: Registry[Any] = Registry().with_resources(
        (uri, DRAFT7.create_resource(_without_dialect(doc))) for uri, doc in documents.items()
    )
    fast_registry = jsonschema_rs.Registry(list(documents.items()))
    checker = FormatChecker(formats=())
    for name, check in FORMAT_CHECKS.items():
        checker.checks(name)(check)
    return registry, fast_registry, checker


class SchemaCheck:
    """One schema (a file, or a ``$ref`` into one) with the fast path and the oracle.

    For objects that are not events (the PSG's Context, Plan, Confirm, Trace): schema only,
    the same verdicts and error shape as :class:`EventValidator`.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        registry, fast_registry, checker = _engines()
        self._oracle = _Oracle(_without_dialect(schema), registry=registry, format_checker=checker)
        self._fast = jsonschema_rs.Draft7Validator(
            schema, formats=FORMAT_CHECKS, validate_formats=True, registry=fast_registry
        )

    @classmethod
    def for_ref(cls, ref: str) -> SchemaCheck:
        return cls({"$ref": ref})

    def validate(self, data: Any) -> ValidationResult:
        try:
            try:
                if self._fast.is_valid(data):
                    return ValidationResult.success()
            except Exception:  # noqa: S110 - input the fast path cannot take goes to the oracle
                pass
            issues: dict[tuple[str, str], ValidationIssue] = {}
            for error in self._oracle.iter_errors(data):
                issue = _issue(error)
                issues.setdefault((issue.path, issue.code), issue)
        except RecursionError:
            return ValidationResult.single("", ErrorCode.UNKNOWN, "input is nested too deeply")
        if not issues:
            log.error("schema engines disagree on an input; rejecting it")
            return ValidationResult.single("", ErrorCode.UNKNOWN, "rejected by the fast validator")
        return ValidationResult.failure(issues.values())


def _without_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    """jsonschema picks a validator class by ``$schema`` whenever it follows a ``$ref``,
    which would drop the oracle's keyword overrides; the class already fixes draft-07."""
    return {key: value for key, value in schema.items() if key != "$schema"}


def _upstream_family(event: dict[str, Any]) -> dict[str, Any]:
    """Observability invariants know the family by its upstream enum value only."""
    if event.get("event_family") == SPEC_FAMILY:
        return {**event, "event_family": UPSTREAM_FAMILY}
    return event


@cache
def default_validator() -> EventValidator:
    return EventValidator()


def validate(kind: Kind, data: Any) -> ValidationResult:
    return default_validator().validate(kind, data)

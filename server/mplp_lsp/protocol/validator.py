"""Validation = JSON Schema + invariants, with one result shape for every caller.

Two schema engines, one verdict:

- the **oracle** is ``jsonschema`` over the schema files: normative, explains every error
  with a path and a code, but costs 150-350 µs per event;
- the **fast path** is ``jsonschema_rs`` compiled from the same files and handed the same
  format functions: 2-3 µs per event, used to accept valid input without the oracle.

Only input the fast path rejects (or cannot handle) goes to the oracle, which then says
why; the oracle (:mod:`mplp_lsp.protocol.oracle`) is imported and compiled at that first
need, so a daemon that only ever sees valid input does not carry it. A hypothesis test
proves both accept and reject exactly the same inputs. Invariants run on every input
through the one engine in :mod:`mplp_lsp.protocol.invariants`.

A file_update payload of the shape the daemon builds itself (a burst's 20,000 events), and
an envelope carrying one (the collector's input), is accepted by
:mod:`mplp_lsp.protocol.file_payload` without asking either engine: it says yes only where
they would, and leaves everything else to them.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from mplp_lsp.protocol.file_payload import plain_file_envelope, plain_file_update
from mplp_lsp.protocol.kinds import (
    PAYLOAD_KINDS,
    SPEC_FAMILY,
    SPECS,
    UPSTREAM_FAMILY,
    Kind,
    kind_for_event_type,
)
from mplp_lsp.protocol.result import ErrorCode, ValidationIssue, ValidationResult
from mplp_lsp.protocol.schemas import all_schema_documents, load_json, schema_path

log = logging.getLogger(__name__)


class EventValidator:
    """Compiled once (at first use), then shared; thread-safe for concurrent reads.

    The schema engine and the invariants' YAML are imported here, not with this module: a
    daemon that has seen no input yet holds neither (intake.Intake.prepare)."""

    def __init__(self) -> None:
        from mplp_lsp.protocol.invariants import InvariantSet

        schemas = {kind: load_json(spec.schema) for kind, spec in SPECS.items()}
        self._fast = {kind: _fast_validator(schema) for kind, schema in schemas.items()}
        self._oracles = {kind: _LazyOracle(schema) for kind, schema in schemas.items()}
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
        return self._oracles[kind].issues(data)

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
        if kind is Kind.FILE_UPDATE and plain_file_update(data):
            return ValidationResult.success()  # what checked() would say, in a quarter of the time
        if kind is Kind.ENVELOPE and plain_file_envelope(data):
            return ValidationResult.success()  # the same, for the collector's envelopes
        return self.checked(kind, data)

    def checked(self, kind: Kind, data: Any) -> ValidationResult:
        """Both schema engines and the invariants, without the shortcut for the daemon's own
        file events (:mod:`mplp_lsp.protocol.file_payload`): what :meth:`validate` answers."""
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


class _LazyOracle:
    """The oracle for one schema, imported and compiled when first asked."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self._checker: Any = None

    def issues(self, data: Any) -> list[ValidationIssue]:
        from mplp_lsp.protocol import oracle

        if self._checker is None:  # a race compiles it twice at worst; both are equal
            self._checker = oracle.oracle_for(self._schema)
        return oracle.issues(self._checker, data)


def _fast_validator(schema: dict[str, Any]) -> Any:
    import jsonschema_rs

    from mplp_lsp.protocol.formats import FORMAT_CHECKS

    return jsonschema_rs.Draft7Validator(
        schema, formats=FORMAT_CHECKS, validate_formats=True, registry=_fast_registry()
    )


@cache
def _fast_registry() -> Any:
    """The fast path's view of every schema file (``$ref`` targets)."""
    import jsonschema_rs

    return jsonschema_rs.Registry(list(all_schema_documents().items()))


class SchemaCheck:
    """One schema (a file, or a ``$ref`` into one) with the fast path and the oracle.

    For objects that are not events (the PSG's Context, Plan, Confirm, Trace): schema only,
    the same verdicts and error shape as :class:`EventValidator`.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self._fast = _fast_validator(schema)
        self._oracle = _LazyOracle(schema)

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
            issues = self._oracle.issues(data)
        except RecursionError:
            return ValidationResult.single("", ErrorCode.UNKNOWN, "input is nested too deeply")
        if not issues:
            log.error("schema engines disagree on an input; rejecting it")
            return ValidationResult.single("", ErrorCode.UNKNOWN, "rejected by the fast validator")
        return ValidationResult.failure(issues)


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

"""The SA profile's invariants (``schemas/v2/invariants/sa-invariants.yaml``) for a flow's run.

A single-agent flow runs only on what the profile allows: a Context with a UUID v4 id that is
``active``, a Plan bound to that Context with at least one step, every step id a UUID v4 and
every ``agent_role`` present non-empty. A run that breaks one is refused before anything is
written, and each broken invariant is one issue whose code is the invariant's own id
(``sa_context_must_be_active``, ``sa_plan_has_steps``, ...): the stable name the profile gives
it. The trace invariants (non-empty events, bound to the Context and the Plan) hold by
construction for the Trace the runtime records (:mod:`mplp_lsp.plans.execution`), and are
checked on it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from mplp_lsp.protocol.invariants import InvariantSet
from mplp_lsp.protocol.result import ValidationIssue, ValidationResult
from mplp_lsp.protocol.schemas import schema_path

SA_INVARIANTS = "v2/invariants/sa-invariants.yaml"


@cache
def sa_invariants() -> InvariantSet:
    return InvariantSet.load(schema_path(SA_INVARIANTS))


def check_sa_run(objects: Mapping[str, Any]) -> ValidationResult:
    """Check ``{"context": ..., "plan": ..., "trace": ...}`` (any of them) against the profile.

    An object the run lacks is checked as ``{}``: a run without a Context breaks
    ``sa_requires_context``.
    """
    invariants = sa_invariants()
    present = {scope: obj if obj is not None else {} for scope, obj in objects.items()}
    issues: list[ValidationIssue] = []
    for scope, subject in present.items():
        environment = {**present, "$self": subject}
        for invariant in invariants.for_scope(scope):
            if not invariant.applies_to(subject):
                continue
            issues.extend(
                ValidationIssue(issue.path, invariant.id, issue.message)
                for issue in invariant.check(subject, environment, (scope,))
            )
    return ValidationResult.failure(issues) if issues else ValidationResult.success()

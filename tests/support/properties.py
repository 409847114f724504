"""How many examples a property test tries: every one in CI, a share in a contributor's run.

A property test's example count is chosen for CI, where every test runs on each change. The
tier a contributor runs before each commit (``pytest -m unit``) has to finish in about a
minute, so outside CI each test tries a quarter of its count (at least ten). A failure found
once is kept in hypothesis's example database and replayed first on the next run, so the
quick run loses breadth, not a known failure. ``MPLP_LSP_THOROUGH=1`` runs every example
anywhere.
"""

from __future__ import annotations

import os

QUICK_SHARE = 4
QUICK_FLOOR = 10


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in {"", "0", "false", "no"}


THOROUGH = _truthy(os.environ.get("CI")) or _truthy(os.environ.get("MPLP_LSP_THOROUGH"))


def examples(count: int) -> int:
    """The examples to try of a property test whose CI count is ``count``."""
    return count if THOROUGH else max(QUICK_FLOOR, count // QUICK_SHARE)


def describe() -> str:
    """One line for pytest's header: how many examples this run tries."""
    if THOROUGH:
        return "property tests: every example (CI or MPLP_LSP_THOROUGH is set)"
    return (
        f"property tests: 1/{QUICK_SHARE} of the examples, at least {QUICK_FLOOR} "
        "(CI=true or MPLP_LSP_THOROUGH=1 runs them all)"
    )

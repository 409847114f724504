"""How many examples a property test tries: every one in CI, a share in a contributor's run.

A property test's example count is chosen for CI. The tier a contributor runs before each
commit (``pytest -m unit``) has to finish in about a minute, so outside CI each test tries a
quarter of its count (at least ten). A failure found once is kept in hypothesis's example
database and replayed first on the next run, so the quick run loses breadth, not a known
failure. ``MPLP_LSP_EXAMPLES=all`` or ``=quick`` chooses either anywhere; ``.ci/run`` times the
unit tier as a contributor runs it, then runs every property test again with all examples.
"""

from __future__ import annotations

import os

QUICK_SHARE = 4
QUICK_FLOOR = 10


def _every_example() -> bool:
    chosen = os.environ.get("MPLP_LSP_EXAMPLES", "").strip().lower()
    if chosen in {"all", "quick"}:
        return chosen == "all"
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


EVERY_EXAMPLE = _every_example()


def examples(count: int) -> int:
    """The examples to try of a property test whose CI count is ``count``."""
    return count if EVERY_EXAMPLE else max(QUICK_FLOOR, count // QUICK_SHARE)


def describe() -> str:
    """One line for pytest's header: how many examples this run tries."""
    if EVERY_EXAMPLE:
        return "property tests: every example (CI, or MPLP_LSP_EXAMPLES=all)"
    return (
        f"property tests: 1/{QUICK_SHARE} of the examples, at least {QUICK_FLOOR} "
        "(MPLP_LSP_EXAMPLES=all runs them all)"
    )

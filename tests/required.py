"""What a test needs from the machine (a real editor, browser, database, program)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """A real part a test needs is missing: skip it with the reason, except under CI
    (CI=true), where every suite must run, so the test fails."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run this test: {reason}")
    pytest.skip(reason)

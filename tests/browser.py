"""Debian's Chromium driven by Playwright, for the real VS Code suite and the dashboard suite."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

from tests.required import unavailable


def chromium() -> str:
    """The browser's path; without it the suite skips, or fails under CI (CI=true)."""
    path = shutil.which("chromium")
    if path is None:
        unavailable("Debian's chromium is not installed (apt-get install chromium)")
    return path


def launched_browser(executable: str) -> Iterator[Any]:
    """A module-scoped fixture's body. Module scope: Playwright's sync API keeps an event loop
    running on this thread until it stops, and the asyncio tests of any module after this one
    need the thread free."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()

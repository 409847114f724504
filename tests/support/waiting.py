"""The one way a test waits: for a readiness signal it can observe (a row stored, a port
answering, a line printed), polled until it holds, failing with what it waited for.

Never a fixed sleep: a sleep is either too short on a loaded machine (a flaky failure) or too
long everywhere else, and it passes whether or not the thing happened.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any, TypeVar, overload

T = TypeVar("T")

_INTERVAL = 0.05


def _timed_out(what: object, timeout: float, last: object) -> AssertionError:
    described = what() if callable(what) else what
    return AssertionError(f"timed out after {timeout:g} s waiting for {described} (last: {last!r})")


def wait_until(
    check: Callable[[], T | None], *, timeout: float = 60.0, what: object = "the condition"
) -> T:
    """The first truthy value of ``check()``, polled every 50 ms; an AssertionError naming
    ``what`` (a string, or a callable saying what is missing) past ``timeout`` seconds.
    Never None (a falsy value), so a check that returns ``X | None`` gives an ``X``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, value)
        time.sleep(_INTERVAL)


# Two signatures, not one ``Callable[[], Awaitable[T] | T]``: from that union mypy cannot tell
# which part a coroutine function's result binds, and infers T as Never.
@overload
async def wait_until_async(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 60.0,
    what: object = "the condition",
) -> T: ...


@overload
async def wait_until_async(
    check: Callable[[], T | None], *, timeout: float = 60.0, what: object = "the condition"
) -> T: ...


async def wait_until_async(
    check: Callable[[], Any], *, timeout: float = 60.0, what: object = "the condition"
) -> Any:
    """:func:`wait_until` on the event loop: ``check`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value: Any = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, value)
        await asyncio.sleep(_INTERVAL)


def line_reader(stream: IO[str], *, timeout: float = 30.0) -> Callable[[], str]:
    """The next line of a child's output, each awaited at most ``timeout`` seconds (then
    ``queue.Empty``), so a silent child fails the test instead of hanging it."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lambda: lines.get(timeout=timeout)

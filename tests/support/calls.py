"""Counting the calls a piece of code makes (system calls, processes started): bounds
that say what work was done, where a time limit would only say how loaded the machine was."""

from __future__ import annotations

from collections import Counter
from typing import Any


def counted(function: Any, name: str, calls: Counter[str]) -> Any:
    """``function``, counting its calls in ``calls[name]``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return function(*args, **kwargs)

    return call

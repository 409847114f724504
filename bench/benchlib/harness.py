"""What every benchmark shares: its command line with ``--quick``, the machine's load average
printed at the start and at the end, and the line that sets a figure beside its target and the
peer measured in the same run.

    bench = Bench(__doc__)
    bench.size("--files", full=100_000, quick=200, help="files in the tree")
    with bench.run() as args:
        ...
        bench.figure("scan", took_ms, "ms", target="<= 2.5x git status",
                     met=took_ms <= 2.5 * git_ms, peer=("git status", git_ms))

``--quick`` is the smallest size that still exercises every code path: seconds, for the tests
that run every benchmark; its targets are printed but not judged. A benchmark that needs a
real part the machine lacks (a browser, PostgreSQL, code-server) calls ``bench.unavailable``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

# The exit status of a benchmark that cannot run here (automake's "skipped"): the tests
# skip it with the reason it printed, and fail under CI, which provides every real part.
UNAVAILABLE = 77

QUICK_HELP = "the smallest size that exercises every code path, in seconds; targets are not judged"


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min; {os.cpu_count()} CPUs)"


def percentile(values: list[float], q: float) -> float:
    """The value at quantile ``q`` (0.5 the median, 0.99 the p99) of the samples: one that was
    measured, not an interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def number(value: float) -> str:
    """A figure with the digits that mean something at its size."""
    size = abs(value)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 1 else 3
    return f"{value:,.{digits}f}"


class Bench:
    """One benchmark's command line and output."""

    def __init__(self, doc: str | None) -> None:
        self.parser = argparse.ArgumentParser(
            description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        self.parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
        self.quick = False
        self._sizes: dict[str, tuple[float, float]] = {}

    def size(self, flag: str, *, full: float, quick: float, help: str) -> None:
        """A size option whose default depends on ``--quick``; given on the command line,
        it wins either way."""
        option = self.parser.add_argument(
            flag,
            type=type(full),
            default=None,
            help=f"{help} (default {full:,}; --quick {quick:,})",
        )
        self._sizes[option.dest] = (full, quick)

    @contextmanager
    def run(self, argv: list[str] | None = None) -> Iterator[argparse.Namespace]:
        """Parse the command line, then print the load average before and after the body."""
        args = self.parser.parse_args(argv)
        self.quick = args.quick
        for dest, (full, quick) in self._sizes.items():
            if getattr(args, dest) is None:
                setattr(args, dest, quick if self.quick else full)
        print(f"load average at start: {load_average()}", flush=True)
        try:
            yield args
        finally:
            print(f"load average at end:   {load_average()}", flush=True)

    def verdict(self, met: bool) -> str:
        if self.quick:
            return "not judged (--quick)"
        return "met" if met else "NOT met"

    def figure(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        target: str | None = None,
        met: bool | None = None,
        peer: tuple[str, float] | None = None,
    ) -> None:
        """``name: value unit   target T: met   peer P: value unit (ratio)``, on one line."""
        parts = [f"{name}: {number(value)} {unit}"]
        if target is not None:
            parts.append(f"target {target}" + ("" if met is None else f": {self.verdict(met)}"))
        if peer is not None:
            peer_name, peer_value = peer
            ratio = f"{value / peer_value:.2f}x" if peer_value else "n/a"
            parts.append(f"peer, same run ({peer_name}): {number(peer_value)} {unit} ({ratio})")
        print("   ".join(parts), flush=True)

    def unavailable(self, reason: str) -> NoReturn:
        """A real part this benchmark needs is missing here: say which, and exit UNAVAILABLE."""
        print(f"{self.parser.prog}: unavailable: {reason}", file=sys.stderr, flush=True)
        raise SystemExit(UNAVAILABLE)

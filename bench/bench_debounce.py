"""Micro benchmark of the file-activity debouncer.

Run from the repository root: ``python bench/bench_debounce.py [--quick] [--count N]``.

Each figure is printed beside a peer measured in the same run, so the ratio shows the
debouncer's own cost rather than the speed of the machine:

* observe() calls per second, against a plain ``dict[path] = observation`` loop of the
  same count (a burst of 20,000 distinct paths, and 20,000 saves of one path);
* how long after the last observation of a 20,000-path burst the whole burst has been
  handed to ``emit``, beyond the quiet period, against how late a bare
  ``loop.call_later(quiet)`` fires on the same loop.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from functools import partial

from benchlib.harness import Bench
from mplp_lsp.sources.debounce import Change, Debouncer, Observation, Settled

QUIET = 0.5
TARGET = 200_000


def best_rate(run: Callable[[], float], count: int, repeat: int) -> float:
    """Calls per second of the fastest of ``repeat`` runs; ``run`` returns seconds taken."""
    return count / min(run() for _ in range(repeat))


def burst(paths: list[str]) -> list[Observation]:
    at = time.monotonic()
    return [Observation(path, Change.MODIFIED, at) for path in paths]


def time_observe(observations: list[Observation]) -> float:
    deb = Debouncer(lambda batch: None, quiet=QUIET)
    observe = deb.observe
    start = time.perf_counter()
    for obs in observations:
        observe(obs)
    return time.perf_counter() - start


def time_dict(observations: list[Observation]) -> float:
    latest: dict[str, Observation] = {}
    start = time.perf_counter()
    for obs in observations:
        latest[obs.path] = obs
    return time.perf_counter() - start


async def bare_timer_lateness() -> float:
    loop = asyncio.get_running_loop()
    fired = loop.create_future()
    start = time.monotonic()
    loop.call_later(QUIET, lambda: fired.set_result(time.monotonic()))
    return float(await fired) - start - QUIET


async def emit_lateness(paths: list[str]) -> tuple[float, int]:
    """Seconds beyond the quiet period until the burst is emitted, and batch count."""
    done = asyncio.get_running_loop().create_future()
    seen = 0
    batches = 0

    def emit(batch: list[Settled]) -> None:
        nonlocal seen, batches
        seen += len(batch)
        batches += 1
        if seen == len(paths):
            done.set_result(time.monotonic())

    deb = Debouncer(emit, quiet=QUIET)
    for path in paths:
        deb.observe(Observation(path, Change.MODIFIED, time.monotonic()))
    last = time.monotonic()
    finished = await done
    await deb.aclose()
    return finished - last - QUIET, batches


async def main(bench: Bench, args: argparse.Namespace) -> None:
    count, repeat = args.count, args.repeat
    paths = [f"src/pkg{i % 97}/module_{i}.py" for i in range(count)]
    distinct = burst(paths)
    one_path = burst([paths[0]] * count)

    print(f"debouncer micro benchmark: {count:,} observations, best of {repeat}")
    rates = {}
    for name, observations in (
        (f"{count:,} distinct paths", distinct),
        (f"{count:,} observations of one path", one_path),
    ):
        rates[name] = best_rate(partial(time_observe, observations), count, repeat)
        bench.figure(
            f"observe() calls/s, {name}",
            rates[name],
            "calls/s",
            target=f">= {TARGET:,}/s",
            met=rates[name] >= TARGET,
            peer=(
                "plain dict assignment",
                best_rate(partial(time_dict, observations), count, repeat),
            ),
        )

    peer = await bare_timer_lateness()
    late, batches = await emit_lateness(paths)
    bench.figure(
        f"last observation -> whole {count:,}-path burst emitted, beyond quiet={QUIET}s",
        late * 1000,
        "ms",
        peer=("bare loop.call_later(quiet) lateness", peer * 1000),
    )
    print(f"  in {batches} batch(es)")


if __name__ == "__main__":
    bench = Bench(__doc__)
    bench.size("--count", full=20_000, quick=200, help="observations in a burst")
    bench.size("--repeat", full=5, quick=1, help="runs of each rate; the best is shown")
    with bench.run() as args:
        asyncio.run(main(bench, args))

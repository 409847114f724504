"""Micro benchmark of the file-activity debouncer.

Run from the repository root: ``PYTHONPATH=server python bench/bench_debounce.py``.

Each figure is printed beside a peer measured in the same run, so the ratio shows the
debouncer's own cost rather than the speed of the machine:

* observe() calls per second, against a plain ``dict[path] = observation`` loop of the
  same count (a burst of 20,000 distinct paths, and 20,000 saves of one path);
* how long after the last observation of a 20,000-path burst the whole burst has been
  handed to ``emit``, beyond the quiet period, against how late a bare
  ``loop.call_later(quiet)`` fires on the same loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mplp_lsp.sources.debounce import Change, Debouncer, Observation, Settled

COUNT = 20_000
QUIET = 0.5
REPEAT = 5
TARGET = 200_000


def best_rate(run: Callable[[], float]) -> float:
    """Calls per second of the fastest of REPEAT runs; ``run`` returns seconds taken."""
    return COUNT / min(run() for _ in range(REPEAT))


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


def report(label: str, figure: float, peer: float, unit: str) -> None:
    print(f"{label}")
    print(f"  figure: {figure:>14,.0f} {unit}")
    print(f"  peer:   {peer:>14,.0f} {unit}  (plain dict assignment)")
    print(f"  ratio:  {figure / peer:>14.3f}  (figure / peer)")


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


async def main() -> None:
    paths = [f"src/pkg{i % 97}/module_{i}.py" for i in range(COUNT)]
    distinct = burst(paths)
    one_path = burst([paths[0]] * COUNT)

    print(f"debouncer micro benchmark: {COUNT:,} observations, best of {REPEAT}\n")
    rate = best_rate(lambda: time_observe(distinct))
    report(
        f"observe() calls/s, {COUNT:,} distinct paths",
        rate,
        best_rate(lambda: time_dict(distinct)),
        "calls/s",
    )
    one_rate = best_rate(lambda: time_observe(one_path))
    report(
        f"observe() calls/s, {COUNT:,} observations of one path",
        one_rate,
        best_rate(lambda: time_dict(one_path)),
        "calls/s",
    )

    peer = await bare_timer_lateness()
    late, batches = await emit_lateness(paths)
    print(f"last observation -> whole {COUNT:,}-path burst emitted, beyond quiet={QUIET}s")
    print(f"  figure: {late * 1000:>10.1f} ms  in {batches} batch(es), tick={QUIET / 10}s")
    print(f"  peer:   {peer * 1000:>10.1f} ms  (bare loop.call_later(quiet) lateness)")
    print(f"  ratio:  {late / peer if peer > 0 else float('inf'):>10.1f}  (figure / peer)")
    print("  (up to one tick of it is deliberate: it gathers paths due close together)")

    verdict = "met" if min(rate, one_rate) >= TARGET else "NOT met"
    print(f"\ntarget >= {TARGET:,} observe()/s: {verdict}")


if __name__ == "__main__":
    asyncio.run(main())

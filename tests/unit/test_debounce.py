"""Coalescing rules, timing and delivery of the file-activity debouncer."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mplp_lsp.sources.debounce import (
    EDITOR,
    WATCHER,
    WILL_SAVE,
    Change,
    Coalescer,
    Debouncer,
    Observation,
    Settled,
)
from tests.support.properties import examples

CREATED, MODIFIED, DELETED, RENAMED = (
    Change.CREATED,
    Change.MODIFIED,
    Change.DELETED,
    Change.RENAMED,
)

Row = tuple[str, Change, str | None]


def ob(
    change: Change,
    path: str,
    at: float = 0.0,
    *,
    prev: str | None = None,
    origin: str = EDITOR,
    **extra: object,
) -> Observation:
    return Observation(path, change, at, previous_path=prev, origin=origin, extra=extra)


def mv(source: str, target: str, at: float = 0.0, *, origin: str = EDITOR) -> Observation:
    return ob(RENAMED, target, at, prev=source, origin=origin)


def feed(rules: Coalescer, observations: Iterable[Observation]) -> Coalescer:
    for i, o in enumerate(observations):
        # spread the sequence in time so "latest" is well defined, all within one window
        rules.add(replace(o, at=o.at or i * 0.001))
    return rules


def rows(settled: Iterable[Settled]) -> list[Row]:
    return sorted((s.path, s.change, s.previous_path) for s in settled)


def settle(*observations: Observation) -> list[Row]:
    return rows(feed(Coalescer(), observations).pop_all())


# -- the table in docs/coalescing.md, one rule per test ------------------------------


def test_created_then_modified_any_number_is_created() -> None:
    rules = feed(Coalescer(), [ob(CREATED, "a"), *[ob(MODIFIED, "a")] * 5])
    [only] = rules.pop_all()
    assert (only.path, only.change, only.count) == ("a", CREATED, 6)


def test_created_then_deleted_is_nothing_and_drops_the_window() -> None:
    rules = feed(Coalescer(), [ob(CREATED, "a"), ob(DELETED, "a")])
    assert rules.pending_count == 0
    assert rules.dropped == 2
    assert rules.pop_all() == []


def test_modified_repeatedly_is_one_modified() -> None:
    assert settle(ob(MODIFIED, "a"), ob(MODIFIED, "a"), ob(MODIFIED, "a")) == [
        ("a", MODIFIED, None)
    ]


def test_modified_then_deleted_is_deleted() -> None:
    assert settle(ob(MODIFIED, "a"), ob(DELETED, "a")) == [("a", DELETED, None)]


def test_deleted_then_created_is_modified() -> None:
    assert settle(ob(DELETED, "a"), ob(CREATED, "a")) == [("a", MODIFIED, None)]


def test_created_deleted_created_is_created() -> None:
    rules = feed(Coalescer(), [ob(CREATED, "a"), ob(DELETED, "a"), ob(CREATED, "a")])
    [only] = rules.pop_all()
    assert (only.path, only.change, only.count, rules.dropped) == ("a", CREATED, 1, 2)


def test_rename_then_modified_is_renamed() -> None:
    assert settle(mv("a", "b"), ob(MODIFIED, "b")) == [("b", RENAMED, "a")]


def test_rename_chain_is_one_rename_from_the_first_path() -> None:
    rules = feed(Coalescer(), [mv("a", "b"), mv("b", "c")])
    assert rules.pending_count == 1
    assert rows(rules.pop_all()) == [("c", RENAMED, "a")]


def test_rename_and_back_is_modified() -> None:
    assert settle(mv("a", "b"), mv("b", "a")) == [("a", MODIFIED, None)]


def test_created_then_renamed_is_created_at_the_new_path() -> None:
    assert settle(ob(CREATED, "a"), mv("a", "b")) == [("b", CREATED, None)]


def test_rename_then_deleted_is_deleted_at_the_old_path() -> None:
    assert settle(mv("a", "b"), ob(DELETED, "b")) == [("a", DELETED, None)]


def test_watcher_delete_and_create_with_same_content_key_is_rename() -> None:
    assert settle(
        ob(DELETED, "a", origin=WATCHER, content_key="k1"),
        ob(CREATED, "x", origin=WATCHER, content_key="k0"),
        ob(CREATED, "b", origin=WATCHER, content_key="k1"),
    ) == [("b", RENAMED, "a"), ("x", CREATED, None)]


def test_watcher_single_delete_and_create_without_keys_is_rename() -> None:
    assert settle(ob(DELETED, "a", origin=WATCHER), ob(CREATED, "b", origin=WATCHER)) == [
        ("b", RENAMED, "a")
    ]


def test_watcher_create_reported_before_the_delete_still_pairs() -> None:
    assert settle(ob(CREATED, "b", origin=WATCHER), ob(DELETED, "a", origin=WATCHER)) == [
        ("b", RENAMED, "a")
    ]


def test_watcher_pair_is_ambiguous_with_a_second_create() -> None:
    assert settle(
        ob(DELETED, "a", origin=WATCHER),
        ob(CREATED, "b", origin=WATCHER),
        ob(CREATED, "c", origin=WATCHER),
    ) == [("a", DELETED, None), ("b", CREATED, None), ("c", CREATED, None)]


def test_watcher_pair_with_different_content_keys_stays_separate() -> None:
    assert settle(
        ob(DELETED, "a", origin=WATCHER, content_key="k1"),
        ob(CREATED, "b", origin=WATCHER, content_key="k2"),
    ) == [("a", DELETED, None), ("b", CREATED, None)]


def test_watcher_content_key_shared_by_two_deletes_is_ambiguous() -> None:
    assert settle(
        ob(DELETED, "a", origin=WATCHER, content_key="empty"),
        ob(DELETED, "b", origin=WATCHER, content_key="empty"),
        ob(CREATED, "c", origin=WATCHER, content_key="empty"),
    ) == [("a", DELETED, None), ("b", DELETED, None), ("c", CREATED, None)]


def test_editor_delete_and_create_are_never_paired() -> None:
    assert settle(ob(DELETED, "a"), ob(CREATED, "b")) == [
        ("a", DELETED, None),
        ("b", CREATED, None),
    ]


@pytest.mark.parametrize(
    "order",
    list(itertools.permutations(range(3))),
    ids=lambda order: "-".join(("rename", "wdel", "wcreate")[i] for i in order),
)
def test_watcher_and_editor_reporting_the_same_move_is_one_rename(order: Sequence[int]) -> None:
    reports = (mv("a", "b"), ob(DELETED, "a", origin=WATCHER), ob(CREATED, "b", origin=WATCHER))
    rules = feed(Coalescer(), [reports[i] for i in order])
    settled = rules.pop_all()
    assert rows(settled) == [("b", RENAMED, "a")]
    assert settled[0].count + rules.dropped == 3


# -- rules added for consistency (also in the table) ---------------------------------


def test_deleted_then_modified_is_modified() -> None:
    assert settle(ob(DELETED, "a"), ob(MODIFIED, "a")) == [("a", MODIFIED, None)]


def test_deleted_twice_is_one_deleted() -> None:
    assert settle(ob(DELETED, "a"), ob(DELETED, "a", origin=WATCHER)) == [("a", DELETED, None)]


def test_created_twice_is_created_and_modified_then_created_is_modified() -> None:
    assert settle(ob(CREATED, "a"), ob(CREATED, "a", origin=WATCHER)) == [("a", CREATED, None)]
    assert settle(ob(MODIFIED, "a"), ob(CREATED, "a")) == [("a", MODIFIED, None)]


def test_created_renamed_deleted_is_nothing() -> None:
    assert settle(ob(CREATED, "a"), mv("a", "b"), ob(DELETED, "b")) == []


def test_recreating_a_renamed_away_path_gives_create_and_modify() -> None:
    assert settle(mv("a", "b"), ob(CREATED, "a")) == [
        ("a", MODIFIED, None),
        ("b", CREATED, None),
    ]


def test_rename_onto_a_file_seen_in_the_window_replaces_it() -> None:
    assert settle(ob(MODIFIED, "b"), mv("a", "b")) == [("b", RENAMED, "a")]
    assert settle(ob(MODIFIED, "b"), mv("a", "b"), ob(DELETED, "b")) == [
        ("a", DELETED, None),
        ("b", DELETED, None),
    ]


def test_swap_through_a_temporary_name_is_two_modifications() -> None:
    assert settle(mv("a", "tmp"), mv("b", "a"), mv("tmp", "b")) == [
        ("a", MODIFIED, None),
        ("b", MODIFIED, None),
    ]


def test_rename_from_a_path_that_already_moved_elsewhere_counts_as_modified() -> None:
    assert settle(mv("a", "b"), mv("a", "c")) == [("b", RENAMED, "a"), ("c", MODIFIED, None)]


def test_latest_extra_wins() -> None:
    rules = feed(
        Coalescer(),
        [ob(MODIFIED, "a", language="py", lines=1), ob(MODIFIED, "a", lines=2)],
    )
    [only] = rules.pop_all()
    assert dict(only.extra) == {"language": "py", "lines": 2}


# -- the rules over time, without a clock (pop_due takes "now") ----------------------


def test_second_rename_just_before_the_first_settles_moves_the_window() -> None:
    rules = Coalescer(quiet=0.5, max_wait=2.0)
    rules.add(mv("a", "b", 0.0))
    rules.add(mv("b", "c", 0.49))
    assert rules.pop_due(0.5) == []
    [only] = rules.pop_due(0.99)
    assert (only.path, only.previous_path, only.count) == ("c", "a", 2)
    assert rules.pending_count == 0


def test_watcher_delete_is_held_until_its_create_settles() -> None:
    rules = Coalescer(quiet=0.5, max_wait=2.0)
    rules.add(ob(DELETED, "a", 0.0, origin=WATCHER))
    rules.add(ob(CREATED, "b", 0.4, origin=WATCHER))
    assert rules.pop_due(0.5) == []
    assert rows(rules.pop_due(0.9)) == [("b", RENAMED, "a")]


def test_watcher_create_after_the_delete_settled_is_not_paired() -> None:
    rules = Coalescer(quiet=0.5, max_wait=2.0)
    rules.add(ob(DELETED, "a", 0.0, origin=WATCHER))
    assert rows(rules.pop_due(0.5)) == [("a", DELETED, None)]
    rules.add(ob(CREATED, "b", 0.6, origin=WATCHER))
    assert rows(rules.pop_due(1.1)) == [("b", CREATED, None)]


def test_a_watchers_echo_of_an_editor_save_does_not_hold_it_back() -> None:
    rules = Coalescer(quiet=0.5, max_wait=2.0)
    rules.add(ob(MODIFIED, "a", 0.0))
    rules.add(ob(MODIFIED, "a", 0.3, origin=WATCHER))
    [only] = rules.pop_due(0.5)
    assert (only.path, only.change, only.count) == ("a", MODIFIED, 2)


def test_a_save_counts_its_quiet_period_from_its_will_save() -> None:
    rules = Coalescer(quiet=0.5, max_wait=2.0)
    rules.add(ob(MODIFIED, "a", 0.0, origin=WILL_SAVE))
    rules.add(ob(MODIFIED, "a", 0.05))  # didSave: the same save, written
    rules.add(ob(MODIFIED, "a", 0.3, origin=WATCHER))  # and its echo
    [only] = rules.pop_due(0.5)
    assert (only.path, only.change, only.count) == ("a", MODIFIED, 3)


def test_a_second_save_still_extends_the_quiet_period() -> None:
    rules = Coalescer(quiet=0.5, max_wait=2.0)
    rules.add(ob(MODIFIED, "a", 0.0, origin=WILL_SAVE))
    rules.add(ob(MODIFIED, "a", 0.05))
    rules.add(ob(MODIFIED, "a", 0.2, origin=WILL_SAVE))
    rules.add(ob(MODIFIED, "a", 0.25))
    assert rules.pop_due(0.5) == []
    assert rows(rules.pop_due(0.7)) == [("a", MODIFIED, None)]
    rules.add(ob(MODIFIED, "b", 0.0))  # a didSave with no willSave before it
    rules.add(ob(MODIFIED, "b", 0.3))
    assert rules.pop_due(0.5) == []


def test_a_watcher_alone_or_an_editor_again_still_extends_the_quiet_period() -> None:
    rules = Coalescer(quiet=0.5, max_wait=2.0)
    rules.add(ob(MODIFIED, "a", 0.0, origin=WATCHER))
    rules.add(ob(MODIFIED, "a", 0.3, origin=WATCHER))
    rules.add(ob(MODIFIED, "b", 0.0))
    rules.add(ob(MODIFIED, "b", 0.3))
    assert rules.pop_due(0.5) == []
    assert rows(rules.pop_due(0.8)) == [("a", MODIFIED, None), ("b", MODIFIED, None)]


def test_negative_timing_is_rejected() -> None:
    with pytest.raises(ValueError):
        Coalescer(quiet=-1.0)
    with pytest.raises(ValueError):
        Coalescer(max_wait=float("nan"))


def test_max_wait_below_quiet_settles_every_window_at_max_wait() -> None:
    rules = Coalescer(quiet=1.0, max_wait=0.5)
    rules.add(ob(MODIFIED, "a", 0.0))
    assert rules.pop_due(0.49) == []
    assert rows(rules.pop_due(0.5)) == [("a", MODIFIED, None)]


# -- Debouncer with an injected clock ------------------------------------------------


@dataclass
class FakeClock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Recorder:
    batches: list[list[Settled]] = field(default_factory=list)

    def __call__(self, batch: list[Settled]) -> None:
        self.batches.append(batch)

    @property
    def settled(self) -> list[Settled]:
        return [s for batch in self.batches for s in batch]


async def test_fake_clock_one_path_many_times_is_one_change() -> None:
    clock, out = FakeClock(), Recorder()
    deb = Debouncer(out, quiet=0.5, max_wait=2.0, clock=clock)
    for _ in range(1000):
        clock.now += 0.0001
        deb.observe(ob(MODIFIED, "a", clock.now))
    assert deb.poll() == 0
    clock.now += 0.5
    assert deb.poll() == 1
    await deb.join()
    assert [(s.path, s.change, s.count) for s in out.settled] == [("a", MODIFIED, 1000)]
    await deb.aclose()


async def test_the_backlog_counts_what_waits_and_what_is_not_yet_through_emit() -> None:
    clock, released = FakeClock(), asyncio.Event()
    delivered: list[int] = []

    async def slow(batch: list[Settled]) -> None:
        await released.wait()
        delivered.append(len(batch))

    deb = Debouncer(slow, quiet=0.5, clock=clock)
    for i in range(30):
        deb.observe(ob(DELETED, f"gone/f{i}", clock.now))
    assert deb.backlog == 30  # in their quiet period
    clock.now += 0.5
    deb.poll()
    await asyncio.sleep(0)
    assert (deb.pending_count, deb.backlog) == (0, 30)  # settled, emit still storing them
    released.set()
    await deb.join()
    assert (deb.backlog, delivered) == (0, [30])
    await deb.aclose()


async def test_fake_clock_distinct_paths_come_in_one_batch() -> None:
    clock, out = FakeClock(), Recorder()
    deb = Debouncer(out, quiet=0.5, clock=clock)
    for i in range(500):
        deb.observe(ob(MODIFIED, f"src/f{i}.py", clock.now))
    clock.now += 0.5
    deb.poll()
    await deb.join()
    assert len(out.batches) == 1
    assert len({s.path for s in out.batches[0]}) == 500
    await deb.aclose()


async def test_a_burst_due_at_once_is_settled_in_steps_with_the_loop_turning_between() -> None:
    """The timer settles a thousand windows a step; the next step follows at once, after
    whatever else waits for the event loop (a request, a commit's answer)."""
    sizes: list[int] = []
    turns: list[int] = []  # len(sizes) whenever another task got the loop

    async def probe() -> None:
        while True:
            turns.append(len(sizes))
            await asyncio.sleep(0)

    deb = Debouncer(lambda batch: sizes.append(len(batch)), quiet=0.01)
    at = time.monotonic()  # one moment: every window falls due together
    deb.observe_many([ob(CREATED, f"src/f{i}.py", at) for i in range(2_500)])
    prober = asyncio.get_running_loop().create_task(probe())
    while sum(sizes) < 2_500:
        await asyncio.sleep(0.005)
    prober.cancel()
    assert sizes == [1_000, 1_000, 500]
    assert {1, 2} <= set(turns)  # the loop turned between the steps
    await deb.aclose()


async def test_fake_clock_paths_due_at_different_times_come_in_separate_batches() -> None:
    clock, out = FakeClock(), Recorder()
    deb = Debouncer(out, quiet=0.5, clock=clock)
    deb.observe(ob(MODIFIED, "a", clock.now))
    deb.observe(ob(MODIFIED, "b", clock.now))
    clock.now += 0.25
    deb.observe(ob(MODIFIED, "c", clock.now))
    clock.now += 0.25
    deb.poll()
    clock.now += 0.25
    deb.poll()
    await deb.join()
    assert [sorted(s.path for s in batch) for batch in out.batches] == [["a", "b"], ["c"]]
    await deb.aclose()


async def test_fake_clock_continuous_saves_emit_at_max_wait() -> None:
    clock, out = FakeClock(), Recorder()
    deb = Debouncer(out, quiet=0.5, max_wait=2.0, clock=clock)
    start = clock.now
    emitted_at: list[float] = []
    for _ in range(20):  # every quiet/2 for 5 s, never quiet for long enough
        deb.observe(ob(MODIFIED, "a", clock.now))
        if deb.poll():
            emitted_at.append(clock.now - start)
        clock.now += 0.25
    await deb.flush()
    assert emitted_at[0] == pytest.approx(2.0)
    assert len(out.settled) >= 3
    assert sum(s.count for s in out.settled) == 20
    await deb.aclose()


async def test_fake_clock_raising_emit_goes_to_on_error_and_later_batches_still_arrive() -> None:
    clock = FakeClock()
    delivered: list[Settled] = []
    failed: list[tuple[list[Settled], BaseException]] = []

    def emit(batch: list[Settled]) -> None:
        if batch[0].path == "bad":
            raise OSError("disk full")
        delivered.extend(batch)

    deb = Debouncer(emit, quiet=0.5, clock=clock, on_error=lambda b, e: failed.append((b, e)))
    deb.observe(ob(MODIFIED, "bad", clock.now))
    clock.now += 0.5
    deb.poll()
    deb.observe(ob(MODIFIED, "good", clock.now))
    clock.now += 0.5
    deb.poll()
    await deb.join()
    assert [s.path for s in delivered] == ["good"]
    assert [([s.path for s in b], type(e)) for b, e in failed] == [(["bad"], OSError)]
    await deb.aclose()


async def test_fake_clock_flush_emits_everything_pending_in_one_batch() -> None:
    clock, out = FakeClock(), Recorder()
    deb = Debouncer(out, quiet=0.5, clock=clock)
    for path in ("a", "b", "c"):
        deb.observe(ob(MODIFIED, path, clock.now))
    assert deb.pending_count == 3
    await deb.flush()
    assert deb.pending_count == 0
    assert [sorted(s.path for s in batch) for batch in out.batches] == [["a", "b", "c"]]
    await deb.aclose()


# -- Debouncer on the real clock (quiet = 50 ms) -------------------------------------

QUIET = 0.05


class Collector:
    """An emit (sync or async) that lets a test wait for a number of settled changes."""

    def __init__(self, *, delay: Callable[[], Awaitable[None]] | None = None) -> None:
        self.batches: list[list[Settled]] = []
        self._delay = delay
        self._changed = asyncio.Event()

    async def __call__(self, batch: list[Settled]) -> None:
        if self._delay is not None:
            await self._delay()
        self.batches.append(batch)
        self._changed.set()

    @property
    def settled(self) -> list[Settled]:
        return [s for batch in self.batches for s in batch]

    async def wait_for(self, count: int) -> None:
        async def enough() -> None:
            while len(self.settled) < count:
                self._changed.clear()
                await self._changed.wait()

        # a guard against hanging, not a performance assertion
        await asyncio.wait_for(enough(), timeout=10)


def now_ob(change: Change, path: str) -> Observation:
    return ob(change, path, time.monotonic())


async def test_real_one_path_many_times_is_one_change() -> None:
    out = Collector()
    deb = Debouncer(out, quiet=QUIET)
    for _ in range(1000):
        deb.observe(now_ob(MODIFIED, "a"))
    await out.wait_for(1)
    await deb.aclose()
    assert [(s.path, s.change, s.count) for s in out.settled] == [("a", MODIFIED, 1000)]


async def test_real_distinct_paths_each_settle_once() -> None:
    out = Collector()
    deb = Debouncer(out, quiet=QUIET)
    for i in range(500):
        deb.observe(now_ob(MODIFIED, f"f{i}"))
    await out.wait_for(500)
    await deb.aclose()
    assert sorted(s.path for s in out.settled) == sorted(f"f{i}" for i in range(500))
    assert all(s.count == 1 for s in out.settled)


async def test_real_paths_observed_together_come_in_one_batch() -> None:
    out = Collector()
    deb = Debouncer(out, quiet=QUIET)
    at = time.monotonic()
    for i in range(100):
        deb.observe(ob(MODIFIED, f"f{i}", at))
    await out.wait_for(100)
    await deb.aclose()
    assert len(out.batches) == 1


async def test_real_continuous_saves_still_emit_while_they_go_on() -> None:
    out = Collector()
    deb = Debouncer(out, quiet=QUIET, max_wait=4 * QUIET)
    observed = 0
    for _ in range(24):  # every quiet/2, for three times max_wait
        deb.observe(now_ob(MODIFIED, "a"))
        observed += 1
        await asyncio.sleep(QUIET / 2)
    during = len(out.settled)
    await deb.aclose()
    assert during >= 1
    assert sum(s.count for s in out.settled) == observed


async def test_real_raising_emit_does_not_stop_later_emits() -> None:
    failed: list[list[Settled]] = []
    good = Collector()

    async def emit(batch: list[Settled]) -> None:
        if any(s.path == "bad" for s in batch):
            raise RuntimeError("consumer broke")
        await good(batch)

    deb = Debouncer(emit, quiet=QUIET, on_error=lambda b, e: failed.append(b))
    deb.observe(now_ob(MODIFIED, "bad"))
    await deb.flush()
    deb.observe(now_ob(MODIFIED, "good"))
    await good.wait_for(1)
    await deb.aclose()
    assert [[s.path for s in b] for b in failed] == [["bad"]]
    assert [s.path for s in good.settled] == ["good"]


async def test_default_on_error_logs_the_count(caplog: pytest.LogCaptureFixture) -> None:
    def emit(batch: list[Settled]) -> None:
        raise RuntimeError("consumer broke")

    deb = Debouncer(emit, quiet=QUIET)
    deb.observe(now_ob(MODIFIED, "a"))
    deb.observe(now_ob(MODIFIED, "b"))
    with caplog.at_level(logging.ERROR, logger="mplp_lsp.sources.debounce"):
        await deb.aclose()
    assert any("2 file change(s)" in r.getMessage() for r in caplog.records)


async def test_emit_cancelled_from_elsewhere_is_a_failed_batch_not_a_shutdown() -> None:
    """pygls#621 flavour: emit awaits something that gets cancelled under it."""
    failed: list[BaseException] = []
    good = Collector()

    async def emit(batch: list[Settled]) -> None:
        if batch[0].path == "a":
            pending_reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(pending_reply.cancel)
            await pending_reply
        await good(batch)

    deb = Debouncer(emit, quiet=QUIET, on_error=lambda b, e: failed.append(e))
    deb.observe(now_ob(MODIFIED, "a"))
    await deb.flush()
    deb.observe(now_ob(MODIFIED, "b"))
    await deb.flush()
    await deb.aclose()
    assert [type(e) for e in failed] == [asyncio.CancelledError]
    assert [s.path for s in good.settled] == ["b"]


async def test_real_flush_emits_everything_pending() -> None:
    out = Collector()
    deb = Debouncer(out, quiet=10.0, max_wait=10.0)
    for path in ("a", "b"):
        deb.observe(now_ob(MODIFIED, path))
    await deb.flush()
    assert sorted(s.path for s in out.settled) == ["a", "b"]
    assert deb.pending_count == 0
    await deb.aclose()


async def test_aclose_waits_for_the_emit_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        started.set()
        await release.wait()

    out = Collector(delay=hold)
    deb = Debouncer(out, quiet=QUIET)
    deb.observe(now_ob(MODIFIED, "a"))
    await asyncio.wait_for(started.wait(), timeout=10)
    deb.observe(now_ob(MODIFIED, "b"))  # observe is not blocked by the emit in flight
    closing = asyncio.create_task(deb.aclose())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not closing.done()
    release.set()
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(closing, timeout=10)
    assert sorted(s.path for s in out.settled) == ["a", "b"]
    assert not [r for r in caplog.records if r.name == "asyncio"]
    with pytest.raises(RuntimeError):
        deb.observe(now_ob(MODIFIED, "c"))


async def test_cancelled_aclose_hands_undelivered_batches_to_on_error() -> None:
    started = asyncio.Event()

    async def hang(batch: list[Settled]) -> None:
        started.set()
        await asyncio.Event().wait()

    failed: list[tuple[list[str], type[BaseException]]] = []
    deb = Debouncer(
        hang, quiet=QUIET, on_error=lambda b, e: failed.append(([s.path for s in b], type(e)))
    )
    deb.observe(now_ob(MODIFIED, "a"))
    await asyncio.wait_for(started.wait(), timeout=10)
    deb.observe(now_ob(MODIFIED, "b"))
    closing = asyncio.create_task(deb.aclose())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert failed == [(["a"], asyncio.CancelledError), (["b"], asyncio.CancelledError)]


# -- properties ----------------------------------------------------------------------

PATHS = ("a", "b", "c", "d")


@dataclass(frozen=True)
class History:
    before: frozenset[str]
    observations: tuple[Observation, ...]


def apply(files: set[str], path: str, change: Change, previous_path: str | None) -> None:
    if change is DELETED:
        files.discard(path)
        return
    if change is RENAMED and previous_path is not None:
        files.discard(previous_path)
    files.add(path)


def after_raw(history: History) -> set[str]:
    files = set(history.before)
    for o in history.observations:
        apply(files, o.path, o.change, o.previous_path)
    return files


def after_settled(before: Iterable[str], batches: Iterable[list[Settled]]) -> set[str]:
    files = set(before)
    for batch in batches:
        for s in batch:
            apply(files, s.path, s.change, s.previous_path)
    return files


def assert_claims_disjoint(batch: list[Settled]) -> None:
    claimed = [s.path for s in batch] + [s.previous_path for s in batch if s.previous_path]
    assert len(claimed) == len(set(claimed)), batch


@st.composite
def histories(draw: st.DrawFn, *, both_sources: bool) -> History:
    """A valid sequence of file operations, reported by one source or by both.

    With ``both_sources`` every operation is reported by the editor and by a watcher
    (a rename as delete + create), and the two ordered streams are interleaved.
    """
    before = draw(st.frozensets(st.sampled_from(PATHS)))
    fingerprinted = draw(st.booleans())
    files = {p: f"v{i}" for i, p in enumerate(sorted(before))}
    versions = itertools.count(len(files))
    streams: tuple[list[Observation], list[Observation]] = ([], [])

    def watched(change: Change, path: str) -> Observation:
        extra = {"content_key": files[path]} if fingerprinted else {}
        return Observation(path, change, 0.0, origin=WATCHER, extra=extra)

    for _ in range(draw(st.integers(0, 12))):
        present = sorted(files)
        absent = [p for p in PATHS if p not in files]
        ops = ["create"] * bool(absent) + ["modify", "delete"] * bool(present)
        ops += ["rename"] * bool(present and absent)
        op = draw(st.sampled_from(ops))
        if op == "rename":
            source, target = draw(st.sampled_from(present)), draw(st.sampled_from(absent))
            moved = watched(DELETED, source)
            files[target] = files.pop(source)
            as_watcher = [moved, watched(CREATED, target)]
            as_editor = [mv(source, target)]
        else:
            path = draw(st.sampled_from(absent if op == "create" else present))
            change = {"create": CREATED, "modify": MODIFIED, "delete": DELETED}[op]
            if op == "delete":
                as_watcher = [watched(change, path)]
                del files[path]
            else:
                files[path] = f"v{next(versions)}"
                as_watcher = [watched(change, path)]
            as_editor = [ob(change, path)]
        if both_sources:
            streams[0].extend(as_editor)
            streams[1].extend(as_watcher)
        else:
            streams[0].extend(draw(st.sampled_from((as_editor, as_watcher))))

    editor, watcher = streams
    order = draw(st.permutations([0] * len(editor) + [1] * len(watcher)))
    sources = (iter(editor), iter(watcher))
    return History(before, tuple(next(sources[i]) for i in order))


# one gap per observation: at most 12 operations of up to 3 reports each
GAPS = st.lists(st.sampled_from((0.0, 0.05, 0.3, 0.6, 2.5)), min_size=36, max_size=36)
any_history = st.booleans().flatmap(lambda both: histories(both_sources=both))
PROPERTY = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY
@given(histories(both_sources=False))
def test_property_one_window_one_source(history: History) -> None:
    rules = feed(Coalescer(), history.observations)
    batch = rules.pop_all()
    assert_claims_disjoint(batch)
    assert after_settled(history.before, [batch]) == after_raw(history)
    touched = {o.path for o in history.observations}
    transient = touched - history.before - after_raw(history)
    assert not transient & ({s.path for s in batch} | {s.previous_path for s in batch})
    assert sum(s.count for s in batch) + rules.dropped == len(history.observations)


@PROPERTY
@given(histories(both_sources=True))
def test_property_one_window_both_sources(history: History) -> None:
    rules = feed(Coalescer(), history.observations)
    batch = rules.pop_all()
    assert_claims_disjoint(batch)
    assert after_settled(history.before, [batch]) == after_raw(history)
    assert sum(s.count for s in batch) + rules.dropped == len(history.observations)


@PROPERTY
@given(any_history, GAPS)
def test_property_debouncer_over_time(history: History, gaps: list[float]) -> None:
    async def run() -> tuple[list[list[Settled]], int]:
        clock, out = FakeClock(), Recorder()
        deb = Debouncer(out, quiet=0.5, max_wait=2.0, clock=clock)
        for gap, o in zip(gaps, history.observations, strict=False):
            clock.now += gap
            deb.poll()
            deb.observe(replace(o, at=clock.now))
        await deb.aclose()
        return out.batches, deb.dropped

    # a private loop: asyncio.run would reset the loop pytest-asyncio keeps for the module
    loop = asyncio.new_event_loop()
    try:
        batches, dropped = loop.run_until_complete(run())
    finally:
        loop.close()
    for batch in batches:
        assert_claims_disjoint(batch)
    assert after_settled(history.before, batches) == after_raw(history)
    settled = sum(s.count for batch in batches for s in batch)
    assert settled + dropped == len(history.observations)

"""The shared command line and output of the benchmarks (bench/benchlib/harness.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchlib.baseline import FIRST_RELEASE, ReleaseUnavailable, describe, release_python
from benchlib.harness import UNAVAILABLE, Bench, number, percentile
from benchlib.stored import StoredCount
from mplp_lsp.store.database import connect
from mplp_lsp.store.events import EventLog
from tests.support.forwarding import new_event
from tests.support.properties import examples


def sized() -> Bench:
    bench = Bench("a benchmark")
    bench.size("--files", full=100_000, quick=20, help="files")
    bench.size("--idle-seconds", full=3600.0, quick=0.5, help="idle")
    return bench


def test_full_sizes_by_default() -> None:
    with sized().run([]) as args:
        assert (args.quick, args.files, args.idle_seconds) == (False, 100_000, 3600.0)


def test_quick_sizes_and_a_given_size_wins() -> None:
    with sized().run(["--quick", "--files", "7"]) as args:
        assert (args.quick, args.files, args.idle_seconds) == (True, 7, 0.5)
    with sized().run(["--files", "7"]) as args:
        assert (args.files, args.idle_seconds) == (7, 3600.0)


def test_load_average_printed_at_start_and_end_even_on_failure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = sized()
    with pytest.raises(RuntimeError), bench.run([]):
        print("figures")
        raise RuntimeError("broken")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("load average at start: ")
    assert lines[1] == "figures"
    assert lines[2].startswith("load average at end: ")


def test_figure_line_judges_the_target_except_under_quick(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, verdict in (([], "NOT met"), (["--quick"], "not judged (--quick)")):
        bench = sized()
        with bench.run(argv):
            bench.figure(
                "scan", 250.0, "ms", target="<= 2x git status", met=False, peer=("git", 100.0)
            )
        out = capsys.readouterr().out
        assert (
            f"scan: 250 ms   target <= 2x git status: {verdict}   "
            "peer, same run (git): 100 ms (2.50x)"
        ) in out


def test_figure_without_target_or_peer(capsys: pytest.CaptureFixture[str]) -> None:
    bench = sized()
    with bench.run([]):
        bench.figure("poll", 0.0042, "ms")
    assert "\npoll: 0.004 ms\n" in capsys.readouterr().out


def test_unavailable_exits_with_its_status_and_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        Bench("x").unavailable("no chromium")
    assert exited.value.code == UNAVAILABLE
    assert capsys.readouterr().err.rstrip().endswith(": unavailable: no chromium")


def test_percentile_is_a_measured_value() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 51.0
    assert percentile(values, 0.99) == 100.0
    assert percentile([3.0], 0.9) == 3.0


def test_number_keeps_the_digits_that_mean_something() -> None:
    assert [number(v) for v in (12345.6, 123.4, 12.34, 1.234, 0.01234)] == [
        "12,346",
        "123",
        "12.3",
        "1.23",
        "0.012",
    ]


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.lists(st.sampled_from(["file_update", "git", "ci"]), max_size=6), max_size=6))
def test_stored_count_follows_the_store_poll_after_poll(
    tmp_path_factory: pytest.TempPathFactory, commits: list[list[str]]
) -> None:
    """Each poll reads only what came since the last, and still says what a full count says."""
    database = tmp_path_factory.mktemp("stored") / "events.db"
    stored = StoredCount(database)
    assert stored.count() == 0  # no store yet
    conn = connect(database)
    serial = 0
    try:
        for kinds in commits:
            events = []
            for kind in kinds:
                events.append(new_event(serial, kind))
                serial += 1
            EventLog(conn).append(events)
            full = conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'file_update'")
            assert stored.count() == full.fetchone()[0]
    finally:
        stored.close()
        conn.close()


def test_a_release_that_is_not_in_the_history_is_left_out_with_gits_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ReleaseUnavailable, match="git rev-parse"):
        release_python("0" * 40)
    assert not any(tmp_path.iterdir())  # nothing built, nothing half-built


def test_the_first_release_is_named_as_such_by_any_form_of_its_commit() -> None:
    assert describe(FIRST_RELEASE) == describe(FIRST_RELEASE[:7]) == "the first release (a1bd6c5)"
    assert describe("HEAD~3") == "mplp-lsp at HEAD~3"

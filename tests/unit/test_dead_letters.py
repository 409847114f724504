"""Dead letters: ``forward.outbox.dead_letters``/``requeue_dead`` and ``mplp-lsp outbox``.

Real SQLite files; the CLI runs in-process through ``cli.main`` (one case as a process).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.cli import main
from mplp_lsp.forward import outbox
from mplp_lsp.store import connect
from tests.support.properties import examples
from tests.support.stores import REFUSALS, assert_counters_match_tables, make_store, tables


@pytest.fixture
def state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    make_store(state / "events.db", 6, REFUSALS)
    return state


def outbox_cli(state: Path, workspace: Path, *args: str) -> int:
    return main(["outbox", *args, "--state-dir", str(state), "--workspace", str(workspace)])


# -- the core --------------------------------------------------------------------------------


@settings(max_examples=examples(40), deadline=None)
@given(
    count=st.integers(1, 12),
    dead=st.sets(st.integers(1, 12)),
    chosen=st.sets(st.integers(0, 14)),
)
def test_requeue_of_chosen_seqs_moves_only_those_and_keeps_the_counters(
    count: int, dead: set[int], chosen: set[int]
) -> None:
    dead = {seq for seq in dead if seq <= count}
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "s.db"
        make_store(db, count, {seq: (400, f"HTTP 400: {seq}", "t") for seq in dead})
        conn = connect(db)
        try:
            listed = outbox.dead_letters(conn, seqs=chosen)
            moved = outbox.requeue_dead(conn, chosen)
        finally:
            conn.close()
        pending, still_dead, counters = tables(db)
        assert [letter.seq for letter in listed] == sorted(dead & chosen)
        assert moved == len(dead & chosen)
        assert still_dead == sorted(dead - chosen)
        assert pending == sorted(set(range(1, count + 1)) - (dead - chosen))
        assert counters.dead_lettered == len(dead)  # every refusal stays counted
        assert counters.dead_letters == len(still_dead)  # what is held now
        assert_counters_match_tables(db)


def test_requeue_without_seqs_still_takes_every_dead_letter(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    make_store(db, 6, REFUSALS)
    conn = connect(db)
    try:
        assert outbox.requeue_dead(conn) == 3
        assert outbox.dead_letters(conn) == []
    finally:
        conn.close()
    assert tables(db)[0] == [1, 2, 3, 4, 5, 6]
    assert_counters_match_tables(db)


# -- mplp-lsp outbox dead --------------------------------------------------------------------


def test_dead_json_lists_exactly_the_dead_letters_with_their_fields(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert outbox_cli(state, tmp_path, "dead", "--json") == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {
            "seq": seq,
            "event_id": f"id-{seq}",
            "kind": "graph_update",
            "status": status,
            "reason": reason,
            "dead_at": at,
            "sink": "collector",
        }
        for seq, (status, reason, at) in sorted(REFUSALS.items())
    ]


def test_dead_limit_takes_the_oldest(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert outbox_cli(state, tmp_path, "dead", "--json", "--limit", "2") == 0
    assert [json.loads(line)["seq"] for line in capsys.readouterr().out.splitlines()] == [2, 4]


def test_dead_table_has_one_line_per_letter_and_no_control_characters(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert outbox_cli(state, tmp_path, "dead") == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["seq", "event_id", "kind", "sink", "status", "dead_at", "reason"]
    assert [row.split()[:6] for row in rows] == [
        [
            str(seq),
            f"id-{seq}",
            "graph_update",
            "collector",
            "-" if status is None else str(status),
            at,
        ]
        for seq, (status, _reason, at) in sorted(REFUSALS.items())
    ]
    assert rows[0].endswith("HTTP 400: invalid envelope")
    assert rows[2].endswith("HTTP 422:  [31mred second line")  # the remote's text, defused


def test_dead_with_none_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    make_store(state / "events.db", 2, {})
    assert outbox_cli(state, tmp_path, "dead") == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("args", [["dead"], ["requeue", "--all"], ["requeue", "3"]])
def test_no_store_is_one_line_on_stderr_and_exit_2_and_creates_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    state = tmp_path / "empty"
    assert outbox_cli(state, tmp_path, *args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "no store for" in captured.err
    assert not (state / "events.db").exists()


@pytest.mark.parametrize(
    "args", [["requeue"], ["requeue", "--all", "3"], ["dead", "--limit", "0"], ["requeue", "x"]]
)
def test_usage_errors_exit_2(tmp_path: Path, state: Path, args: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        outbox_cli(state, tmp_path, *args)
    assert exited.value.code == 2


# -- mplp-lsp outbox requeue -----------------------------------------------------------------


def test_requeue_chosen_seqs_moves_only_those(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert outbox_cli(state, tmp_path, "requeue", "2", "5") == 0
    assert capsys.readouterr().out == "requeued 2 dead letters\n"
    pending, dead, counters = tables(state / "events.db")
    assert (pending, dead) == ([1, 2, 3, 5, 6], [4])
    assert counters.dead_lettered == 3
    assert_counters_match_tables(state / "events.db")


def test_requeue_names_unknown_seqs_exits_1_and_still_requeues_the_known(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 3 is an event still pending, 99 no event at all: neither is a dead letter.
    assert outbox_cli(state, tmp_path, "requeue", "99", "4", "3") == 1
    captured = capsys.readouterr()
    assert captured.out == "requeued 1 dead letter\n"
    assert captured.err == "mplp-lsp outbox requeue: not dead letters: 3, 99\n"
    assert tables(state / "events.db")[:2] == ([1, 3, 4, 6], [2, 5])
    assert_counters_match_tables(state / "events.db")


def test_dead_into_a_reader_that_stops_early_ends_quietly(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    make_store(
        state / "events.db",
        3000,
        {seq: (400, "HTTP 400", "2026-03-02T09:00:00.000Z") for seq in range(1, 3001)},
    )
    command = [sys.executable, "-m", "mplp_lsp", "outbox", "dead", "--json"]
    command += ["--state-dir", str(state), "--workspace", str(tmp_path)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        assert child.stdout is not None and child.stderr is not None
        first = child.stdout.readline()
        child.stdout.close()  # as `| head -1` does
        errors = child.stderr.read()
    assert json.loads(first)["seq"] == 1
    assert (child.returncode, errors) == (0, b"")


def test_status_shows_refusals_ever_and_the_dead_letters_held_now(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert outbox_cli(state, tmp_path, "requeue", "2") == 0
    capsys.readouterr()
    assert main(["status", "--state-dir", str(state), "--workspace", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  dead lettered       3" in lines  # every refusal ever made
    assert "  dead letters held   2 (mplp-lsp outbox dead)" in lines  # 4 and 5

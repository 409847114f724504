"""``mplp-lsp events`` and ``mplp-lsp status`` over a real store, as real processes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mplp_lsp.engine.statedir import StateDirLock, StatePaths
from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.database import SCHEMA_VERSION
from mplp_lsp.store.events import EventLog, NewEvent
from mplp_lsp.store.writer import StoreWriter
from tests.conftest import sample
from tests.old_store import store_at_version
from tests.support.daemon import cli
from tests.support.waiting import line_reader


def store_events(state: Path, *items: tuple[Kind, str]) -> None:
    async def write() -> None:
        writer = StoreWriter(state / "events.db")
        await writer.start()
        events = []
        for index, (kind, timestamp) in enumerate(items):
            payload = sample(kind.value)
            payload["timestamp"] = timestamp  # the event's own time: what `events` orders by
            if kind is Kind.FILE_UPDATE:
                payload["file_path"] = f"f{index}.py"
            envelope = build_envelope(kind, payload, source_module="test", timestamp=timestamp)
            events.append(
                NewEvent(
                    envelope["event_id"], kind.value, envelope["event_id"], timestamp, envelope
                )
            )
        await writer.append(events)
        await writer.run(lambda conn: EventLog(conn).bump("rejected", 2))
        await writer.close()

    asyncio.run(write())


@pytest.fixture
def state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    store_events(
        state,
        (Kind.FILE_UPDATE, "2026-01-01T10:00:00.000Z"),
        (Kind.GIT, "2026-01-01T11:00:00.000Z"),
        (Kind.FILE_UPDATE, "2026-01-01T12:00:00.000Z"),
    )
    return state


def test_events_json_one_envelope_per_line(state: Path, tmp_path: Path) -> None:
    done = cli("events", "--json", "--state-dir", str(state), "--workspace", str(tmp_path))
    assert done.returncode == 0
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["event_type"] for line in lines] == ["file_update", "git_operation", "file_update"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--kind", "file_update"], ["f0.py", "f2.py"]),
        (["--since", "2026-01-01T11:30:00Z"], ["f2.py"]),
        (["--kind", "file_update", "--limit", "1"], ["f2.py"]),  # the newest
        (["--kind", "file_update", "--limit", "1", "--oldest"], ["f0.py"]),
    ],
)
def test_events_filters(state: Path, tmp_path: Path, args: list[str], expected: list[str]) -> None:
    done = cli("events", "--json", *args, "--state-dir", str(state), "--workspace", str(tmp_path))
    assert [
        json.loads(line)["payload"]["file_path"] for line in done.stdout.splitlines()
    ] == expected


def test_events_human_lines(state: Path, tmp_path: Path) -> None:
    done = cli("events", "--state-dir", str(state), "--workspace", str(tmp_path))
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    assert "file_update" in lines[0] and "f0.py" in lines[0]
    assert "refs/heads/main" in lines[1]


def test_events_refuses_a_kind_the_log_never_stores(state: Path, tmp_path: Path) -> None:
    args = ("--state-dir", str(state), "--workspace", str(tmp_path))
    done = cli("events", "--kind", "file_updates", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown --kind 'file_updates'; did you mean 'file_update'?" in done.stderr
    assert cli("events", "--kind", "envelope", *args).returncode == 2  # stored by payload kind


def test_events_with_no_store_says_so(tmp_path: Path) -> None:
    done = cli("events", "--state-dir", str(tmp_path / "empty"), "--workspace", str(tmp_path))
    assert done.returncode == 0
    assert done.stdout == ""
    assert "no events recorded yet" in done.stderr


def test_events_on_a_store_caught_mid_creation_prints_nothing_instead_of_failing(
    tmp_path: Path,
) -> None:
    # Another process has created the file but not yet committed its first migration.
    state = tmp_path / "state"
    state.mkdir()
    sqlite3.connect(state / "events.db").close()
    done = cli("events", "--json", "--state-dir", str(state), "--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    status = cli("status", "--json", "--state-dir", str(state), "--workspace", str(tmp_path))
    assert status.returncode == 0, status.stderr


def test_events_reads_a_store_left_at_an_older_schema(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    database = state / "events.db"
    conn = store_at_version(database, SCHEMA_VERSION - 1)
    for index in range(3):
        envelope = build_envelope(Kind.FILE_UPDATE, sample("file_update"), source_module="test")
        conn.execute(
            "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body)"
            " VALUES (?, 'file_update', ?, ?, ?, ?)",
            (
                envelope["event_id"],
                f"key-{index}",
                envelope["timestamp"],
                envelope["timestamp"],
                json.dumps(envelope),
            ),
        )
    conn.close()
    done = cli("events", "--json", "--state-dir", str(state), "--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    conn = sqlite3.connect(database)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_events_bad_since_is_a_usage_error(state: Path, tmp_path: Path) -> None:
    assert cli("events", "--since", "yesterday-ish", "--state-dir", str(state)).returncode == 2


def test_events_follow_prints_new_events(state: Path, tmp_path: Path) -> None:
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mplp_lsp",
            "events",
            "--json",
            "--follow",
            "--state-dir",
            str(state),
            "--workspace",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        next_line = line_reader(follower.stdout)
        seen = [json.loads(next_line()) for _ in range(3)]
        store_events(state, (Kind.CI, "2026-01-02T00:00:00.000Z"))
        later = json.loads(next_line())
    finally:
        follower.terminate()
        follower.wait(timeout=10)
    assert len(seen) == 3
    assert later["event_type"] == "ci_pipeline"


def test_status_json(state: Path, tmp_path: Path) -> None:
    done = cli("status", "--json", "--state-dir", str(state), "--workspace", str(tmp_path))
    report = json.loads(done.stdout)
    assert report["events_by_kind"] == {"file_update": 2, "git": 1}
    assert report["events_total"] == 3
    assert report["rejected"] == 2
    assert report["last_event_time"] == "2026-01-01T12:00:00.000Z"
    assert report["store_bytes"] > 0
    assert report["daemon"] is None


def test_status_names_the_recording_daemon(state: Path, tmp_path: Path) -> None:
    with StateDirLock(StatePaths(state).lock, workspace=tmp_path):
        done = cli("status", "--state-dir", str(state), "--workspace", str(tmp_path))
    assert "daemon        pid " in done.stdout
    assert "rejected      2" in done.stdout

"""The timeline follows each event's own time, not its arrival (spec §6.4.2: "Order is not
assumed; reconstruct the timeline from timestamps"): `mplp-lsp events` (its order, --since,
--limit and --oldest, --follow) and the dashboard's events and export, with real processes on
a repository that has files and history before the daemon starts."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import Repo
from tests.support.waiting import line_reader, wait_until
from tests.ui.daemon import Watch, base_env, cli

# Emitted in this order; none of them happened in it.
TIMES = (
    "2030-01-02T08:00:00.000Z",
    "2024-05-01T12:00:00.000Z",
    "2030-01-01T09:30:00.000Z",
    "2025-12-24T18:00:00.000Z",
    "2030-01-01T09:29:59.999Z",
)


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Watch, list[str]]:
    repo = Repo.create(tmp_path / "project")
    for folder in ("src", "tests"):
        (repo.path / folder).mkdir()
    repo.commit("the first module", "src/app.py")
    repo.commit("its test", "tests/test_app.py")
    env = base_env(tmp_path)
    watch = Watch.start(repo.path, tmp_path / "state", env)
    paths = [f"notes/{index}.md" for index in range(len(TIMES))]
    for path, when in zip(paths, TIMES, strict=True):
        emit = ("emit", "file", "--path", path, "--change", "modified", "--timestamp", when)
        cli(env, *emit, "--workspace", str(repo.path), "--state-dir", str(watch.state_dir))
    wait_until(lambda: len(_ours(events(watch, "--json"))) == 5, what="the emitted events stored")
    return watch, paths


def events(watch: Watch, *args: str) -> list[str]:
    where = ("--workspace", str(watch.workspace), "--state-dir", str(watch.state_dir))
    return cli(watch.env, "events", *args, *where).stdout.splitlines()


def _ours(lines: list[str]) -> list[str]:
    """The emitted events' times, in the order printed (JSON lines)."""
    found = [json.loads(line)["payload"] for line in lines]
    return [p["timestamp"] for p in found if p.get("file_path", "").startswith("notes/")]


def test_events_lists_in_the_order_events_happened(recorded: tuple[Watch, list[str]]) -> None:
    watch, _ = recorded
    try:
        assert _ours(events(watch, "--json")) == sorted(TIMES)
        assert (
            _ours(events(watch, "--json", "--since", "2030-01-01T00:00:00Z")) == sorted(TIMES)[-3:]
        )
        # The newest two of the whole log (nothing else happened in 2030), oldest first.
        assert _ours(events(watch, "--json", "--limit", "2")) == sorted(TIMES)[-2:]
        assert _ours(events(watch, "--json", "--limit", "1", "--oldest")) == [min(TIMES)]
        human = [line for line in events(watch, "--since", "2030-01-01") if "notes/" in line]
        assert [line.split()[1] for line in human] == sorted(TIMES)[-3:]
        assert all("(received 20" in line and "(received 2030" not in line for line in human)
    finally:
        watch.stop()


def test_the_dashboard_shows_and_exports_in_the_order_events_happened(
    recorded: tuple[Watch, list[str]],
) -> None:
    watch, _ = recorded
    try:
        span = "from=2030-01-01T00:00:00Z&to=2030-01-03T00:00:00Z"
        bucket = watch.get(f"/ui/api/timeline/events?{span}&lane=editor")["events"]
        assert [e["timestamp"] for e in bucket] == sorted(TIMES)[-3:]
        assert all(e["received_at"] < "2030" for e in bucket)
        exported = [json.loads(line) for line in _raw(watch, "/ui/api/export?format=jsonl")]
        mine = [
            e
            for e in exported
            if e["envelope"]["payload"].get("file_path", "").startswith("notes/")
        ]
        assert [e["timestamp"] for e in mine] == sorted(TIMES)
        stamps = [e["timestamp"] for e in exported]
        assert stamps == sorted(stamps)
        since = watch.get("/events?since=2030-01-01T00:00:00Z&kind=file_update")["events"]
        assert sorted(e["envelope"]["payload"]["timestamp"] for e in since) == sorted(TIMES)[-3:]
    finally:
        watch.stop()


def test_follow_goes_on_from_the_newest_with_what_is_stored_next(
    recorded: tuple[Watch, list[str]],
) -> None:
    watch, _ = recorded
    argv = [sys.executable, "-I", "-m", "mplp_lsp", "events", "--json", "--follow"]
    where = [
        "--limit",
        "1",
        "--workspace",
        str(watch.workspace),
        "--state-dir",
        str(watch.state_dir),
    ]
    follower = subprocess.Popen(
        [*argv, *where], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=watch.env
    )
    try:
        assert follower.stdout is not None
        read = line_reader(follower.stdout)
        assert json.loads(read())["payload"]["timestamp"] == max(TIMES)
        # Stored after the listing: printed as it arrives, though it happened long before.
        emit = ("emit", "file", "--path", "late.md", "--change", "created")
        when = ("--timestamp", "2020-01-01T00:00:00Z")
        cli(watch.env, *emit, *when, *where[2:])
        assert json.loads(read())["payload"]["file_path"] == "late.md"
    finally:
        follower.kill()
        follower.wait()
        watch.stop()


def _raw(watch: Watch, path: str) -> list[str]:
    token = (watch.state_dir / "api-token").read_text()
    request = urllib.request.Request(watch.url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body: Any = response.read().decode()
    return [line for line in body.splitlines() if line]

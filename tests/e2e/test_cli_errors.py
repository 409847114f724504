"""Every subcommand given bad values, as a real process: one line on stderr and an exit
status, never a traceback; and what used to crash (``events`` over a CI event, ``status``
into a closed pipe, the collector's last page) works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.collector import Collector
from tests.support.daemon import env, mplp

# (arguments, expected exit status); {ws} is a workspace that exists, {state} its state dir.
BAD = [
    (["nope"], 2),
    (["events", "--limit", "-3"], 2),
    (["events", "--limit", "many"], 2),
    (["events", "--since", "yesterday-ish"], 2),
    (["events", "--kind", "nope"], 2),
    (["events", "--workspace", "{ws}/missing"], 1),
    (["status", "--workspace", "{ws}/missing"], 1),
    (["validate", "{ws}/missing.json"], 2),
    (["emit", "tool", "--json", "{ws}/missing.json", "--state-dir", "{state}"], 1),
    (["emit", "tool", "--exit-code", "x"], 2),
    (["emit", "ci", "--status", "running", "--state-dir", "{state}"], 1),
    (["emit", "ci", "--status", "bogus"], 2),
    (["emit", "file", "--change", "exploded"], 2),
    (["emit", "git", "--hook", "pre-everything"], 2),
    (["run", "--state-dir", "{state}"], 2),
    (["hooks", "install", "--workspace", "{ws}", "--state-dir", "{state}"], 1),
    (["hooks", "reinstall"], 2),
    (["drift", "--workspace", "{ws}/missing"], 1),
    (["flow", "run", "{ws}/missing-plan.json", "--workspace", "{ws}", "--state-dir", "{state}"], 1),
    (["flow", "explode"], 2),
    (["outbox", "explode"], 2),
    (["collector", "serve", "--port", "99999"], 2),
    (["collector", "serve", "--port", "-1"], 2),
    (["serve", "--api-port", "99999"], 2),
    (["watch", "{ws}/missing"], 1),
]


@pytest.mark.parametrize(("args", "status"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values_give_one_line_and_a_status(
    tmp_path: Path, args: list[str], status: int
) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    argv = [a.format(ws=ws, state=state) for a in args]
    done = mplp(ws, *argv)
    assert done.returncode == status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr


def test_events_lists_a_ci_event_and_status_survives_a_closed_pipe(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    ci = {"ci_provider": "github_actions", "run_id": "7", "status": "running"}
    ci["started_at"] = "2026-01-01T00:00:00Z"
    (ws / "ci.json").write_text(json.dumps({**ci, "pipeline_id": "build"}))
    assert mplp(ws, "emit", "ci", "--json", "ci.json", "--state-dir", str(state)).returncode == 0
    done = mplp(ws, "events", "--state-dir", str(state))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "github_actions build #7" in done.stdout
    # A reader that stops after one line: no traceback, no "Exception ignored".
    piped = subprocess.run(
        f"{sys.executable} -m mplp_lsp status --state-dir {state} | head -1",
        shell=True, cwd=ws, env=env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert piped.stderr == "" and len(piped.stdout.splitlines()) == 1, piped


def test_collector_last_page_has_no_next(tmp_path: Path) -> None:
    collector = Collector(tmp_path / "collector.db")
    try:
        page = collector.get("/events?after=0&limit=5")
        assert page == {"events": [], "next": None}
    finally:
        collector.stop()

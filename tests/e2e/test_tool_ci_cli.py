"""`mplp-lsp run` and `mplp-lsp emit ci|tool|file` as real processes, against a real store."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.engine.intake import Submission
from mplp_lsp.protocol.envelope import new_id
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import default_validator
from tests.support.ci_env import CASES
from tests.support.collector import TOKEN, Collector, free_port
from tests.support.daemon import env, mplp

CANARY = "ghp_" + "Q" * 36


INTEGRATION = {"ci_pipeline", "tool_execution", "file_update", "git_event"}


def stored(workspace: Path, state: Path) -> list[dict[str, Any]]:
    """The integration events (not the PSG's graph_update / pipeline_stage they cause)."""
    done = mplp(workspace, "events", "--json", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    return [e for e in events if e["event_type"] in INTEGRATION]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def test_run_keeps_the_exit_code_and_records_running_then_failed(
    workspace: Path, state: Path
) -> None:
    done = mplp(
        workspace / "sub",
        "run", "--state-dir", str(state), "--kind", "test_runner", "--",
        sys.executable, "-c", f"import sys; print('out {CANARY}'); sys.exit(3)",
    )  # fmt: skip
    assert done.returncode == 3
    assert f"out {CANARY}" in done.stdout  # the tool's own output, untouched
    events = [e for e in stored(workspace, state) if e["event_type"] == "tool_execution"]
    assert [e["payload"]["status"] for e in events] == ["running", "failed"]
    end = events[-1]["payload"]
    assert end["exit_code"] == 3 and end["tool_kind"] == "test_runner"
    assert end["working_directory"] == "sub"
    assert CANARY not in json.dumps(events) and "[REDACTED" in end["output_summary"]
    assert len({e["payload"]["invocation_id"] for e in events}) == 1
    for event in events:
        assert default_validator().validate(Kind.ENVELOPE, event).ok


def start_wrapper(
    workspace: Path, state: Path, *command: str, sigint: Any = signal.SIG_DFL
) -> subprocess.Popen[bytes]:
    """``mplp-lsp run`` with SIGINT set as given: the test runner may itself have been started
    as a background job of a script, which ignores SIGINT, and the wrapper would inherit that."""
    return subprocess.Popen(
        [sys.executable, "-m", "mplp_lsp", "run", "--state-dir", str(state), "--", *command],
        cwd=workspace,
        env=env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )


def wait_until_running(workspace: Path, state: Path, wrapper: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not any(e["payload"].get("status") == "running" for e in stored(workspace, state)):
        assert time.monotonic() < deadline and wrapper.poll() is None
        time.sleep(0.1)


def test_sigint_during_a_long_command_records_cancelled_and_exits_130(
    workspace: Path, state: Path
) -> None:
    wrapper = start_wrapper(workspace, state, "sleep", "30")
    wait_until_running(workspace, state, wrapper)
    began = time.monotonic()
    wrapper.send_signal(signal.SIGINT)
    assert wrapper.wait(20) == 130
    assert time.monotonic() - began < 10  # sleep 30 was stopped, not waited for
    statuses = [e["payload"]["status"] for e in stored(workspace, state)]
    assert statuses == ["running", "cancelled"]


def test_a_wrapper_started_with_sigint_ignored_leaves_it_ignored(
    workspace: Path, state: Path
) -> None:
    wrapper = start_wrapper(workspace, state, "sleep", "2", sigint=signal.SIG_IGN)
    wait_until_running(workspace, state, wrapper)
    wrapper.send_signal(signal.SIGINT)
    assert wrapper.wait(30) == 0
    statuses = [e["payload"]["status"] for e in stored(workspace, state)]
    assert statuses == ["running", "succeeded"]


@pytest.mark.parametrize("provider", sorted(CASES))
def test_emit_ci_reads_each_providers_environment(
    workspace: Path, state: Path, provider: str
) -> None:
    variables, expected = CASES[provider]
    done = mplp(
        workspace, "emit", "ci", "--status", "succeeded", "--stage", "build:succeeded:1200",
        "--state-dir", str(state), **variables,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [event] = stored(workspace, state)
    assert default_validator().validate(Kind.ENVELOPE, event).ok
    payload = event["payload"]
    assert payload["ci_provider"] == provider
    assert {k: payload[k] for k in expected} == expected
    assert payload["status"] == "succeeded" and "completed_at" in payload
    assert payload["stages"] == [
        {"stage_name": "build", "status": "succeeded", "duration_ms": 1200}
    ]


def test_emit_ci_flags_override_the_environment(workspace: Path, state: Path) -> None:
    variables, _ = CASES["github_actions"]
    done = mplp(
        workspace, "emit", "ci", "--status", "running", "--branch", "hotfix",
        "--state-dir", str(state), **variables,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [event] = stored(workspace, state)
    assert event["payload"]["branch_name"] == "hotfix"
    assert event["payload"]["run_id"] == "9876543210"


def test_emit_ci_outside_ci_names_the_missing_flags(workspace: Path, state: Path) -> None:
    done = mplp(workspace, "emit", "ci", "--status", "failed", "--state-dir", str(state))
    assert done.returncode == 1
    assert "--provider, --pipeline-id, --run-id" in done.stderr
    assert json.loads(done.stdout)["errors"][0]["code"] == "required"
    assert not state.joinpath("events.db").exists() or stored(workspace, state) == []


def test_emit_ci_bad_stage_is_refused(workspace: Path, state: Path) -> None:
    done = mplp(
        workspace, "emit", "ci", "--status", "running", "--provider", "x", "--pipeline-id",
        "p", "--run-id", "1", "--stage", "build:exploded", "--state-dir", str(state),
    )  # fmt: skip
    assert done.returncode == 1
    assert "NAME:STATUS" in json.loads(done.stdout)["errors"][0]["message"]


def test_emit_tool_and_file(workspace: Path, state: Path) -> None:
    invocation = new_id()
    for status in ("running", "succeeded"):
        done = mplp(
            workspace, "emit", "tool", "--tool-id", "ruff-0.6.9", "--kind", "linter",
            "--invocation-id", invocation, "--status", status, "--state-dir", str(state),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    outside = mplp(
        workspace, "emit", "file", "--path", "../etc/passwd", "--change", "modified",
        "--state-dir", str(state),
    )  # fmt: skip
    assert outside.returncode == 1
    assert json.loads(outside.stdout)["errors"][0]["code"] == "path_traversal"
    inside = mplp(
        workspace, "emit", "file", "--path", "sub/a.py", "--change", "created",
        "--state-dir", str(state),
    )  # fmt: skip
    assert inside.returncode == 0, inside.stderr
    kinds = [(e["event_type"], e["payload"].get("status")) for e in stored(workspace, state)]
    assert kinds == [
        ("tool_execution", "running"),
        ("tool_execution", "succeeded"),
        ("file_update", None),
    ]


def test_emit_remote_delivers_and_spools_while_the_remote_is_down(
    workspace: Path, state: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ci = ["--provider", "jenkins", "--pipeline-id", "app", "--state-dir", str(state)]
    down = mplp(workspace, "emit", "ci", "--status", "running", "--run-id", "1", *ci,
                "--remote", url, "--wait", "0.5")  # fmt: skip
    assert down.returncode == 0, down.stderr  # stored, and queued for later
    assert "still queued" in down.stderr
    collector = Collector(tmp_path / "collector.db", port)
    try:
        up = mplp(workspace, "emit", "ci", "--status", "succeeded", "--run-id", "1", *ci,
                  "--remote", url)  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert "still queued" not in up.stderr
        arrived = collector.events()
    finally:
        collector.stop()
    runs = [i["envelope"] for i in arrived if i["envelope"]["event_type"] == "ci_pipeline"]
    statuses = [envelope["payload"]["status"] for envelope in runs]
    assert statuses == ["running", "succeeded"]  # the spooled one first, then the new one
    assert TOKEN not in down.stderr + up.stderr


def test_duplicate_and_out_of_order_tool_reports_end_in_one_state(tmp_path: Path) -> None:
    from mplp_lsp.engine.handoff import deliver

    invocation = new_id()
    base = {"tool_id": "pytest-8", "tool_kind": "test_runner", "invocation_id": invocation}
    reports = [
        {**base, "status": "running", "started_at": "2026-01-01T10:00:00.000Z"},
        {**base, "status": "succeeded", "started_at": "2026-01-01T10:00:00.000Z",
         "completed_at": "2026-01-01T10:00:05.000Z", "exit_code": 0},
    ]  # fmt: skip
    shuffler = random.Random(11)
    finals = set()
    for run in range(100):
        deliveries = reports + shuffler.choices(reports, k=3)
        shuffler.shuffle(deliveries)
        root = tmp_path / f"ws{run}"
        root.mkdir()
        state = tmp_path / f"state{run}"
        outcome = deliver(root, state, [Submission(Kind.TOOL, r, "test") for r in deliveries])
        assert sum(d.status == "accepted" for d in outcome) == 2  # each report stored once
        import sqlite3

        with sqlite3.connect(state / "events.db") as conn:
            finals.add(
                conn.execute(
                    "SELECT status, started_at, completed_at, exit_code FROM tool_invocations"
                ).fetchall()[0]
            )
    assert finals == {("succeeded", "2026-01-01T10:00:00.000Z", "2026-01-01T10:00:05.000Z", 0)}

"""Plans run in the daemon that owns the store: ``flow run`` beside ``watch``, the HTTP route.

Real processes: ``mplp-lsp watch`` in the background, ``mplp-lsp flow run`` as a separate
process, the API over a real loopback socket.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.protocol.envelope import new_id
from tests.e2e.harness import watch_argv
from tests.support.daemon import cli as mplp
from tests.support.plans import context_doc, plan_doc

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


@dataclass
class Daemon:
    workspace: Path
    state_dir: Path
    url: str
    token: str

    def flow_run(
        self, plan: dict[str, Any], context: dict[str, Any] | None, *extra: str
    ) -> subprocess.CompletedProcess[str]:
        return flow_run(self.workspace, self.state_dir, plan, context, *extra)

    def post(self, path: str, body: Any) -> tuple[int, str, str]:
        """(status, content type, body text) of a POST to the daemon's API."""
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.headers["Content-Type"], response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Content-Type"], error.read().decode()


def flow_run(
    workspace: Path,
    state_dir: Path,
    plan: dict[str, Any],
    context: dict[str, Any] | None,
    *extra: str,
) -> subprocess.CompletedProcess[str]:
    folder = state_dir.parent / f"docs-{new_id()}"
    folder.mkdir()
    (folder / "plan.json").write_text(json.dumps(plan))
    args = ["flow", "run", str(folder / "plan.json"), "--workspace", str(workspace)]
    args += ["--state-dir", str(state_dir), *extra]
    if context is not None:
        (folder / "context.json").write_text(json.dumps(context))
        args += ["--context", str(folder / "context.json")]
    return mplp(*args)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    base = tmp_path_factory.mktemp("daemon")
    workspace, state_dir = base / "ws", base / "state"
    workspace.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "mplp_lsp", "watch", str(workspace), "--state-dir", str(state_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        api = None
        while api is None and time.monotonic() < deadline:
            status = mplp(
                "status", "--json", "--state-dir", str(state_dir), "--workspace", str(workspace)
            )
            api = json.loads(status.stdout).get("api") if status.returncode == 0 else None
            time.sleep(0.2)
        assert api is not None, "the daemon never reported its API"
        token = Path(api["token_file"]).read_text().strip()
        yield Daemon(workspace, state_dir, api["url"], token)
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err


def normalised(output: str) -> list[str]:
    """The output with what differs between any two runs (times, ids) blanked out."""
    return [TIME.sub("<time>", UUID.sub("<id>", line)) for line in output.splitlines()]


def test_flow_run_hands_the_plan_to_the_daemon_with_the_same_output(
    daemon: Daemon, tmp_path: Path
) -> None:
    context = context_doc()
    plan = plan_doc(context["context_id"])
    alone_ws, alone_state = tmp_path / "alone", tmp_path / "alone-state"
    alone_ws.mkdir()
    alone = flow_run(alone_ws, alone_state, plan, context)
    assert alone.returncode == 0, alone.stderr
    through = daemon.flow_run(plan, context)
    assert through.returncode == 0, through.stderr  # was 2: "state dir in use"
    assert normalised(through.stdout) == normalised(alone.stdout)
    assert through.stderr == alone.stderr == ""
    kinds = [line.split()[1] for line in through.stdout.splitlines()[:-1]]
    assert {"graph_update", "pipeline_stage", "runtime_execution"} <= set(kinds)
    summary = json.loads(through.stdout.splitlines()[-1])
    assert summary["success"] is True and summary["execution"]["plan_status"] == "completed"
    # It ran in the daemon's store: the daemon's graph holds the completed plan.
    status, _, body = daemon.post(f"/psg/plans/{plan['plan_id']}/run", {})
    assert status == 409 and "transition" in body  # completed plans do not run again
    events = mplp(
        "events",
        "--json",
        "--state-dir",
        str(daemon.state_dir),
        "--workspace",
        str(daemon.workspace),
    )
    assert plan["plan_id"] in events.stdout


def test_the_api_route_runs_the_same_plan_with_the_same_events(
    daemon: Daemon, tmp_path: Path
) -> None:
    context = context_doc()
    plan = plan_doc(context["context_id"])
    status, content_type, body = daemon.post(
        f"/psg/plans/{plan['plan_id']}/run", {"plan": plan, "context": context}
    )
    assert status == 200 and content_type.startswith("application/x-ndjson")
    lines = [json.loads(line) for line in body.splitlines()]
    *events, last = lines
    assert last["result"]["success"] is True
    assert last["result"]["execution"]["order"] == [s["step_id"] for s in plan["steps"]]
    seqs = [line["event"]["seq"] for line in events]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    # The same plan run by flow run alone stores the same events, in the same order.
    alone_ws = tmp_path / "alone"
    alone_ws.mkdir()
    alone = flow_run(alone_ws, tmp_path / "alone-state", plan, context)
    assert alone.returncode == 0, alone.stderr
    printed = [line.split()[1:] for line in alone.stdout.splitlines()[:-1]]
    streamed = [[e["event"]["kind"], e["event"]["envelope"]["event_type"]] for e in events]
    assert streamed == printed
    assert normalised(json.dumps(last["result"])) == normalised(alone.stdout.splitlines()[-1])


def _violations() -> list[tuple[str, dict[str, Any] | None, dict[str, Any]]]:
    """(the invariant, the context sent, the plan) — one broken SA invariant each."""
    inactive = context_doc()
    inactive["status"] = "draft"
    bad_id = context_doc()
    bad_id["context_id"] = bad_id["context_id"].upper()
    bound = context_doc()
    role = context_doc()
    role_plan = plan_doc(role["context_id"])
    role_plan["steps"][0]["agent_role"] = "  "
    return [
        ("sa_context_must_be_active", inactive, plan_doc(inactive["context_id"])),
        ("sa_requires_context", bad_id, plan_doc(bad_id["context_id"].lower())),
        ("sa_plan_context_binding", bound, plan_doc(new_id())),
        ("sa_steps_agent_role_if_present", role, role_plan),
    ]


@pytest.mark.parametrize(
    ("invariant", "context", "plan"), _violations(), ids=[v[0] for v in _violations()]
)
def test_a_plan_breaking_an_sa_invariant_is_refused_with_its_code(
    daemon: Daemon, invariant: str, context: dict[str, Any] | None, plan: dict[str, Any]
) -> None:
    done = daemon.flow_run(plan, context)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # refused before anything was written
    assert invariant in [e["code"] for e in json.loads(done.stderr)["errors"]]
    other = {**plan, "plan_id": new_id()}
    status, content_type, body = daemon.post(
        f"/psg/plans/{other['plan_id']}/run", {"plan": other, "context": context}
    )
    assert (status, content_type.split(";")[0]) == (422, "application/json")
    assert invariant in [e["code"] for e in json.loads(body)["errors"]]
    status, _, _ = daemon.post(f"/psg/plans/{other['plan_id']}/run", {})
    assert status == 404  # nothing was stored: not even the plan


def test_flow_run_json_output_is_the_same_through_the_daemon(
    daemon: Daemon, tmp_path: Path
) -> None:
    context = context_doc()
    plan = plan_doc(context["context_id"])
    alone_ws = tmp_path / "alone"
    alone_ws.mkdir()
    alone = flow_run(alone_ws, tmp_path / "alone-state", plan, context, "--json")
    through = daemon.flow_run(plan, context, "--json")
    assert (alone.returncode, through.returncode) == (0, 0), through.stderr
    assert normalised(through.stdout) == normalised(alone.stdout)
    assert normalised(through.stderr) == normalised(alone.stderr)  # the summary
    assert all(json.loads(line)["event_id"] for line in through.stdout.splitlines())


def test_a_daemon_without_its_api_still_refuses_a_second_writer(tmp_path: Path) -> None:
    workspace, state_dir = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    process = subprocess.Popen(
        watch_argv(workspace, state_dir, "--no-api"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        assert "watching" in process.stderr.readline()  # the store is open and owned
        context = context_doc()
        done = flow_run(workspace, state_dir, plan_doc(context["context_id"]), context)
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    assert done.returncode == 2
    assert "in use by process" in done.stderr and "Traceback" not in done.stderr

"""``mplp-lsp flow run`` and the runnable example of docs/runtime-execution.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mplp_lsp.cli import main
from mplp_lsp.protocol.kinds import EVENT_FAMILY_KINDS, Kind
from mplp_lsp.protocol.validator import default_validator
from tests.conftest import REPO
from tests.support.plans import context_doc, plan_doc


def test_the_docs_example_runs(tmp_path: Path) -> None:
    text = (REPO / "docs" / "runtime-execution.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", text, re.S)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True completed"


@pytest.mark.parametrize("fails", [False, True])
def test_flow_run_prints_the_events_and_exits_by_the_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fails: bool
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    context = context_doc()
    plan = plan_doc(context["context_id"])
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "context.json").write_text(json.dumps(context))
    args = ["flow", "run", str(tmp_path / "plan.json"), "--context", str(tmp_path / "context.json")]
    args += ["--workspace", str(root), "--state-dir", str(tmp_path / "state"), "--json"]
    if fails:
        second = plan["steps"][1]["step_id"]
        action = {"type": "tool", "argv": [sys.executable, "-c", "raise SystemExit(4)"]}
        (tmp_path / "actions.json").write_text(json.dumps({second: action}))
        args += ["--executor", "workspace", "--actions", str(tmp_path / "actions.json")]
    code = main(args)
    out = capsys.readouterr()
    events = [json.loads(line) for line in out.out.splitlines()]
    assert code == (1 if fails else 0)
    summary = json.loads(out.err.strip().splitlines()[-1])
    assert summary["execution"]["plan_status"] == ("failed" if fails else "completed")
    families = [e["event_family"] for e in events]
    assert "pipeline_stage" in families and "runtime_execution" in families
    validator = default_validator()
    for event in events:
        family = event["event_family"]
        kind = Kind(family) if family in {k.value for k in EVENT_FAMILY_KINDS} else Kind.ENVELOPE
        assert validator.validate(kind, event).ok


def test_flow_run_refuses_a_bad_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    context = context_doc()
    plan = plan_doc(context["context_id"])
    plan["status"] = "approved"  # new plans start as drafts
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "context.json").write_text(json.dumps(context))
    code = main(
        ["flow", "run", str(tmp_path / "plan.json"), "--context", str(tmp_path / "context.json"),
         "--workspace", str(root), "--state-dir", str(tmp_path / "state")]
    )  # fmt: skip
    assert code == 2
    assert "initial_status" in capsys.readouterr().err

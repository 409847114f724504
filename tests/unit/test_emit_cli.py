"""``mplp-lsp emit git``: checked first, stored directly, or queued for the daemon's inbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mplp_lsp.cli import main
from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.handoff import deliver
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.statedir import StateDirLock
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sources import inbox
from mplp_lsp.store.database import connect
from mplp_lsp.store.events import EventLog
from tests.conftest import sample


def git_events(db: Path) -> list[dict[str, object]]:
    conn = connect(db, read_only=True)
    try:
        return [e.envelope["payload"] for e in EventLog(conn).query(kinds=["git"])]
    finally:
        conn.close()


def test_bad_input_prints_the_result_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "emit",
            "git",
            "--workspace",
            str(tmp_path),
            "--state-dir",
            str(tmp_path / "s"),
            "--commit-id",
            "abc",
            "--event-kind",
            "teleport",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["ok"] is False
    assert {"required", "enum"} <= {e["code"] for e in out["errors"]}
    assert "event_kind" in (tmp_path / "s" / "integration-errors.jsonl").read_text()


def test_json_from_a_file_is_stored_without_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payload = sample("git") | {"repo_url": "https://bob:hunter22@git.example.org/a.git"}
    source = tmp_path / "event.json"
    source.write_text(json.dumps(payload))
    state = tmp_path / "s"
    args = ["emit", "git", "--workspace", str(tmp_path), "--state-dir", str(state)]
    assert main([*args, "--json", str(source)]) == 0
    assert capsys.readouterr().out.strip() == "accepted"
    assert main([*args, "--json", str(source)]) == 0
    assert capsys.readouterr().out.strip() == "duplicate"
    [stored] = git_events(state / "events.db")
    assert stored["repo_url"] == "https://git.example.org/a.git"


async def test_queued_while_the_daemon_owns_the_store(tmp_path: Path) -> None:
    state = tmp_path / "s"
    workspace = await Workspace.open(tmp_path, Settings(), state_dir=state)
    try:
        [delivery] = deliver(tmp_path, state, [Submission(Kind.GIT, sample("git"), "cli")])
        assert delivery.status == "queued"
        await inbox.drain(workspace.paths.inbox, workspace.intake)
        assert inbox.pending(workspace.paths.inbox) == []
        assert [e["commit_id"] for e in git_events(state / "events.db")] == [
            sample("git")["commit_id"]
        ]
    finally:
        await workspace.close()


def test_a_spool_left_by_a_dead_owner_is_taken_by_the_next_cli(tmp_path: Path) -> None:
    state = tmp_path / "s"
    state.mkdir()
    holder = StateDirLock(state / "daemon.lock")
    assert holder.acquire()
    [first] = deliver(tmp_path, state, [Submission(Kind.GIT, sample("git"), "cli")])
    holder.release()  # the "daemon" died without draining its inbox
    other = sample("git") | {"commit_id": "f" * 40}
    [second] = deliver(tmp_path, state, [Submission(Kind.GIT, other, "cli")])
    assert (first.status, second.status) == ("queued", "accepted")
    assert len(git_events(state / "events.db")) == 2
    assert inbox.pending(state / "inbox") == []

"""Drift detection and reconciliation on a real workspace: real files, store and git."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mplp_lsp.config.settings import Settings
from mplp_lsp.drift import Reason, Strategy
from mplp_lsp.drift.merge import merge
from mplp_lsp.drift.repository import read_state
from mplp_lsp.drift.scan import check
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.graph.content_hash import safe_hash
from mplp_lsp.sources.debounce import Change

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return done.stdout.strip()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    git(ws, "init", "-q")
    return ws


async def open_workspace(root: Path, state: Path, **settings: object) -> Workspace:
    values = {"debounce_ms": 0, "max_wait_ms": 0, "drift_interval": 0, **settings}
    return await Workspace.open(root, Settings(**values), state_dir=state)  # type: ignore[arg-type]


@pytest.fixture
async def ws(root: Path, tmp_path: Path) -> AsyncIterator[Workspace]:
    workspace = await open_workspace(root, tmp_path / "state")
    yield workspace
    await workspace.close()


async def record(ws: Workspace, path: str, text: str, change: Change = Change.MODIFIED) -> None:
    (ws.root / path).parent.mkdir(parents=True, exist_ok=True)
    (ws.root / path).write_text(text)
    ws.observe(change, path)
    await ws.settle()
    await ws.bus.drain()


def graph_updates(ws: Workspace) -> list[dict[str, object]]:
    conn = sqlite3.connect(ws.paths.database)
    try:
        import json

        rows = conn.execute("SELECT body FROM events WHERE kind = 'graph_update' ORDER BY seq")
        return [json.loads(body) for (body,) in rows]
    finally:
        conn.close()


async def test_nothing_changed_means_no_drift(ws: Workspace) -> None:
    await record(ws, "a.py", "x = 1\n")
    summary = await ws.drift.scan()
    assert (summary.checked, summary.drifted) == (1, 0)
    assert ws.drift.drifts == {}


async def test_out_of_band_change_is_drift_and_file_system_wins(ws: Workspace) -> None:
    await record(ws, "a.py", "x = 1\n")
    (ws.root / "a.py").write_text("x = 2\n")
    await ws.drift.scan()
    [drift] = ws.drift.open_drifts.values()
    assert (drift.path, drift.reason) == ("a.py", Reason.MODIFIED)
    assert "differs" in drift.message()
    before = len(graph_updates(ws))
    result = await ws.drift.resolve("a.py", Strategy.FS)
    assert result.ok
    assert ws.drift.drifts == {}
    assert (await ws.drift.scan()).drifted == 0
    [event] = graph_updates(ws)[before:]
    assert (event["event_type"], event["update_kind"]) == ("file_drift_resolved", "node_update")
    assert (await ws.status()).drift == 0


async def test_touch_without_content_change_is_not_drift(ws: Workspace) -> None:
    await record(ws, "a.py", "x = 1\n")
    os.utime(ws.root / "a.py", ns=(1, 1))
    assert (await ws.drift.scan()).drifted == 0
    conn = sqlite3.connect(ws.paths.database)
    (mtime,) = conn.execute("SELECT mtime_ns FROM psg_files WHERE path = 'a.py'").fetchone()
    conn.close()
    assert mtime == 1  # the record follows, so the next scan need not hash it


async def test_psg_wins_restores_the_exact_bytes(ws: Workspace) -> None:
    original = "line one\r\nline two\tü\n"
    await record(ws, "a.py", original)
    recorded = (ws.root / "a.py").read_bytes()
    (ws.root / "a.py").write_text("something else\n")
    await ws.drift.scan()
    result = await ws.drift.resolve("a.py", Strategy.PSG)
    assert result.ok, result.message
    assert (ws.root / "a.py").read_bytes() == recorded
    assert ws.drift.drifts == {}
    assert (await ws.drift.scan()).drifted == 0


async def test_psg_wins_restores_a_deleted_file(ws: Workspace) -> None:
    await record(ws, "d/a.py", "keep me\n")
    (ws.root / "d/a.py").unlink()
    await ws.drift.scan()
    assert ws.drift.drifts["d/a.py"].reason is Reason.DELETED
    assert (await ws.drift.resolve("d/a.py", Strategy.PSG)).ok
    assert (ws.root / "d/a.py").read_text() == "keep me\n"


async def test_file_system_wins_on_a_deleted_file_removes_the_node(ws: Workspace) -> None:
    await record(ws, "a.py", "x\n")
    (ws.root / "a.py").unlink()
    await ws.drift.scan()
    assert (await ws.drift.resolve("a.py", Strategy.FS)).ok
    assert graph_updates(ws)[-1]["update_kind"] == "node_delete"
    assert (await ws.drift.scan()).checked == 0


async def test_deleting_a_drifted_file_through_an_event_clears_it(ws: Workspace) -> None:
    await record(ws, "a.py", "x\n")
    (ws.root / "a.py").write_text("y\n")
    await ws.drift.scan()
    assert "a.py" in ws.drift.drifts
    (ws.root / "a.py").unlink()
    ws.observe(Change.DELETED, "a.py")
    await ws.settle()
    await ws.bus.drain()
    assert ws.drift.drifts == {}


async def test_a_new_event_for_a_drifted_file_clears_it(ws: Workspace) -> None:
    await record(ws, "a.py", "x\n")
    (ws.root / "a.py").write_text("y\n")
    await ws.drift.scan()
    await record(ws, "a.py", "z\n")
    assert ws.drift.drifts == {}


async def test_ignore_defers_until_the_file_changes_again(ws: Workspace) -> None:
    await record(ws, "a.py", "x\n")
    (ws.root / "a.py").write_text("y\n")
    await ws.drift.scan()
    assert (await ws.drift.resolve("a.py", Strategy.IGNORE)).ok
    await ws.drift.scan()
    assert ws.drift.open_drifts == {}
    (ws.root / "a.py").write_text("a longer change\n")
    await ws.drift.scan()
    assert "a.py" in ws.drift.open_drifts


async def test_a_file_that_becomes_ignored_loses_its_drift(ws: Workspace) -> None:
    await record(ws, "a.log", "x\n")
    (ws.root / "a.log").write_text("y\n")
    await ws.drift.scan()
    assert "a.log" in ws.drift.drifts
    await record(ws, ".gitignore", "*.log\n")
    await ws.drift.scan()
    assert "a.log" not in ws.drift.drifts


async def test_merge_without_conflict_and_with_conflict(ws: Workspace) -> None:
    base = "".join(f"line {i}\n" for i in range(1, 11))
    (ws.root / "m.txt").write_text(base)
    git(ws.root, "add", "m.txt")
    git(ws.root, "commit", "-qm", "base")
    # the PSG records an edit at the top; the disk then gets one at the bottom
    await record(ws, "m.txt", base.replace("line 1\n", "line 1 (psg)\n"))
    (ws.root / "m.txt").write_text(base.replace("line 10\n", "line 10 (disk)\n"))
    await ws.drift.scan()
    result = await ws.drift.resolve("m.txt", Strategy.MERGE)
    assert result.ok, result.message
    merged = (ws.root / "m.txt").read_text()
    assert "line 1 (psg)\n" in merged and "line 10 (disk)\n" in merged
    assert ws.drift.drifts == {}
    # now both sides change the same line
    (ws.root / "m.txt").write_text(merged.replace("line 5\n", "line 5 (disk)\n"))
    await record(ws, "m.txt", merged.replace("line 5\n", "line 5 (psg)\n"))
    (ws.root / "m.txt").write_text(merged.replace("line 5\n", "line 5 (disk)\n"))
    await ws.drift.scan()
    result = await ws.drift.resolve("m.txt", Strategy.MERGE)
    assert not result.ok and result.conflicts == 1
    text = (ws.root / "m.txt").read_text()
    assert "<<<<<<< m.txt (disk)" in text and ">>>>>>> m.txt (PSG)" in text
    drift = ws.drift.open_drifts["m.txt"]
    assert drift.note is not None and "conflict" in drift.note


def test_merge_file_roles() -> None:
    # ours (disk), base (HEAD), theirs (PSG): a change on each side, far enough apart
    result = merge(b"a\nb\nc\nd\nE\n", b"a\nb\nc\nd\ne\n", b"A\nb\nc\nd\ne\n", name="f")
    assert (result.content, result.conflicts) == (b"A\nb\nc\nd\nE\n", 0)


async def test_recheck_is_limited_to_the_paths_given(ws: Workspace) -> None:
    for i in range(5):
        await record(ws, f"f{i}.py", f"{i}\n")
    await ws.drift.scan()
    for i in range(5):
        (ws.root / f"f{i}.py").write_text("changed\n")
    await ws.drift.recheck(["f1.py", "f3.py"])
    assert set(ws.drift.drifts) == {"f1.py", "f3.py"}


async def test_scan_survives_a_fifo_a_symlink_loop_and_a_vanished_file(ws: Workspace) -> None:
    await record(ws, "fifo", "was a file\n")
    await record(ws, "loop/x.py", "x\n")
    await record(ws, "gone.py", "y\n")
    await record(ws, "ok.py", "z\n")
    (ws.root / "fifo").unlink()
    os.mkfifo(ws.root / "fifo")
    (ws.root / "loop/x.py").unlink()
    (ws.root / "loop").rmdir()
    (ws.root / "loop").symlink_to("loop")  # a symlink pointing at itself
    (ws.root / "gone.py").unlink()
    summary = await ws.drift.scan()
    assert summary.checked == 4
    reasons = {path: d.reason for path, d in ws.drift.drifts.items()}
    assert reasons == {
        "fifo": Reason.NOT_A_FILE,
        "loop/x.py": Reason.UNREADABLE,
        "gone.py": Reason.DELETED,
    }


def test_safe_hash_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f")
    assert safe_hash(str(tmp_path / "f")) is None


def test_a_cancelled_check_stops(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    conn = sqlite3.connect(":memory:")
    outcome = check(str(tmp_path), [("a", (1, 1, 1))], conn, now="t", cancel=cancel)
    assert outcome.cancelled


async def test_drift_found_at_start_up_after_a_change_while_stopped(
    root: Path, tmp_path: Path
) -> None:
    first = await open_workspace(root, tmp_path / "state")
    await record(first, "a.py", "x\n")
    await first.close()
    (root / "a.py").write_text("changed while stopped\n")
    second = await open_workspace(root, tmp_path / "state")
    try:
        await second.drift.scan()
        assert "a.py" in second.drift.open_drifts
    finally:
        await second.close()


async def test_repository_moves_the_daemon_recorded_are_no_drift(
    root: Path, tmp_path: Path
) -> None:
    (root / "r.txt").write_text("r\n")
    git(root, "add", "r.txt")
    git(root, "commit", "-qm", "one")
    workspace = await open_workspace(root, tmp_path / "state")
    try:
        assert (await workspace.drift.scan()).repository is None
        git(root, "checkout", "-qb", "other")
        git(root, "commit", "-q", "--allow-empty", "-m", "two")
        assert (await workspace.drift.scan()).repository is None
        git(root, "commit", "-q", "--allow-empty", "-m", "three")
        git(root, "checkout", "-q", "-")
        assert (await workspace.drift.scan()).repository is None
        # A reset moves the branch without any git_event: the PSG still says "three".
        git(root, "checkout", "-q", "other")
        three = git(root, "rev-parse", "HEAD")
        git(root, "reset", "-q", "--hard", "HEAD~1")
        summary = await workspace.drift.scan()
        assert summary.repository is not None
        assert (summary.repository.recorded_branch, summary.repository.recorded_head) == (
            "other",
            three,
        )
        assert summary.repository.head == git(root, "rev-parse", "HEAD")
        await workspace.drift.record_repository()  # "the file system wins"
        assert (await workspace.drift.scan()).repository is None
    finally:
        await workspace.close()


async def test_repository_changed_while_stopped_is_drift_until_caught_up(
    root: Path, tmp_path: Path
) -> None:
    from mplp_lsp.drift.git_record import GitRepositoryRecord
    from mplp_lsp.store.database import connect

    git(root, "commit", "-q", "--allow-empty", "-m", "one")
    state = tmp_path / "state"
    workspace = await open_workspace(root, state)
    await workspace.close()
    git(root, "checkout", "-qb", "elsewhere")
    git(root, "commit", "-q", "--allow-empty", "-m", "made while stopped")
    conn = connect(state / "events.db", read_only=True)
    try:
        recorded = GitRepositoryRecord().recorded(conn)
    finally:
        conn.close()
    assert recorded is not None and recorded != read_state(root / ".git")
    assert recorded.branch in ("main", "master")
    workspace = await open_workspace(root, state)  # catch-up records it
    try:
        assert (await workspace.drift.scan()).repository is None
    finally:
        await workspace.close()


def test_read_state_of_packed_and_detached_heads(root: Path) -> None:
    (root / "f").write_text("f")
    git(root, "add", "f")
    git(root, "commit", "-qm", "c")
    head = git(root, "rev-parse", "HEAD")
    git(root, "pack-refs", "--all")
    state = read_state(root / ".git")
    assert state is not None and state.head == head
    git(root, "checkout", "-q", "--detach")
    assert read_state(root / ".git") == type(state)(head, None)


def test_files_in_agrees_with_is_ignored(root: Path) -> None:
    from mplp_lsp.ignore.rules import IgnoreRules

    (root / ".gitignore").write_text("*.log\nbuild/\n!keep.log\n/top.txt\nsub/*.tmp\n")
    (root / "sub").mkdir()
    (root / "sub/.gitignore").write_text("local.txt\n")
    (root / "sub/dir.log").mkdir()
    paths = [
        "a.log", "keep.log", "top.txt", "sub/top.txt", "sub/x.tmp", "sub/deep/x.tmp",
        "sub/local.txt", "other/local.txt", "build/x.py", "sub/build/y.py", "src/a.py",
        "sub/dir.log", "logs/a.py", ".git/config", "sub/.git",
    ]  # fmt: skip
    rules = IgnoreRules(root, excludes=["*.py[co]", "vendor/"])
    paths += ["vendor/a.py", "src/a.pyc"]
    fresh = IgnoreRules(root, excludes=["*.py[co]", "vendor/"])
    from mplp_lsp.drift.scan import per_directory

    judge = per_directory(fresh.files_in)
    assert {p: judge(p) for p in paths} == {p: rules.is_ignored(p) for p in paths}


def snapshot_count(ws: Workspace) -> int:
    conn = sqlite3.connect(ws.paths.database)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM psg_snapshots").fetchone()[0])
    finally:
        conn.close()


async def test_snapshots_are_deduplicated_and_pruned(ws: Workspace) -> None:
    await record(ws, "a.txt", "same\n")
    await record(ws, "b.txt", "same\n")
    assert snapshot_count(ws) == 1
    await record(ws, "a.txt", "other\n")
    assert snapshot_count(ws) == 2
    (ws.root / "b.txt").unlink()
    ws.observe(Change.DELETED, "b.txt")
    await ws.settle()
    assert snapshot_count(ws) == 1  # "same" is referenced by no node any more
    (ws.root / "bin.dat").write_bytes(b"\x00\x01binary")
    ws.observe(Change.CREATED, "bin.dat")
    await ws.settle()
    assert snapshot_count(ws) == 1  # binary content is not kept


async def test_a_late_event_is_named_in_the_finding(ws: Workspace) -> None:
    from mplp_lsp.engine.intake import Submission
    from mplp_lsp.protocol.kinds import Kind

    await record(ws, "a.py", "x\n")
    (ws.root / "a.py").write_text("changed behind the PSG's back\n")
    late = {"file_path": "a.py", "change_type": "modified", "timestamp": "2020-01-01T00:00:00Z"}
    await ws.intake.submit(Submission(Kind.FILE_UPDATE, late, "ide", trusted_paths=True))
    await ws.bus.drain()
    drift = ws.drift.open_drifts["a.py"]
    assert drift.note is not None and "late file_update" in drift.note
    assert "2020-01-01" in drift.message()


def test_a_damaged_drift_record_is_skipped_not_fatal(tmp_path: Path) -> None:
    from mplp_lsp.drift import records
    from mplp_lsp.store.database import connect

    conn = connect(tmp_path / "events.db")
    conn.execute(
        "INSERT INTO psg_drift (path, reason, detected_at) VALUES ('a.py', 'deleQed', 't'),"
        " ('b.py', ?, 't')",
        (Reason.DELETED.value,),
    )
    assert list(records.load(conn)) == ["b.py"]
    conn.close()

"""``mplp-lsp watch`` as a real process against files written the way real tools write them:
a source tree extracted by tar, thousands of files in new directories, a create and delete
inside one watcher batch, odd names and odd file types, and changes made while it was stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.harness import file_events, lsp_session, recorded_paths, watching
from tests.gitrepo import Repo
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux only"),
]

PROJECT = Path(__file__).resolve().parents[2]


def wait_until_created(state_dir: Path, expected: set[str], timeout: float = 60.0) -> None:
    def missing() -> list[str]:
        return sorted(expected - {e["file_path"] for e in file_events(state_dir)})

    wait_until(
        lambda: not missing(), timeout=timeout, what=lambda: f"file events of {missing()[:5]}"
    )


def test_a_source_tree_extracted_by_tar_is_recorded_file_by_file(
    workspace: Path, state_dir: Path
) -> None:
    if not (PROJECT / ".git").exists():
        pytest.skip("needs the project's Git checkout for git archive")
    archive = subprocess.run(
        ["git", "-C", str(PROJECT), "archive", "--prefix=tree/", "HEAD"],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    listing = subprocess.run(["tar", "t"], input=archive, check=True, capture_output=True)
    names = listing.stdout.decode().splitlines()
    files = {name for name in names if not name.endswith("/")}
    directories = {name.rstrip("/") for name in names if name.endswith("/")}
    with watching(workspace, state_dir) as watch:
        subprocess.run(["tar", "x", "-C", str(workspace)], input=archive, check=True)
        wait_until_created(state_dir, files)
        time.sleep(1.0)  # a late duplicate would land now
        assert watch.process.poll() is None
    events = file_events(state_dir)
    counts = Counter(e["file_path"] for e in events)
    assert set(counts) == files
    assert [path for path, count in counts.items() if count != 1] == []
    assert {e["change_type"] for e in events} == {"created"}
    assert not directories & set(counts)


def test_ten_thousand_files_in_five_hundred_new_directories(
    workspace: Path, state_dir: Path
) -> None:
    writer = (
        "import os, sys\n"
        "root = sys.argv[1]\n"
        "for d in range(500):\n"
        "    directory = os.path.join(root, 'burst', f'd{d:03}')\n"
        "    os.makedirs(directory)\n"
        "    for f in range(20):\n"
        "        with open(os.path.join(directory, f'f{f:02}.txt'), 'w') as out:\n"
        "            out.write(f'{d} {f}\\n')\n"
    )
    expected = {f"burst/d{d:03}/f{f:02}.txt" for d in range(500) for f in range(20)}
    with watching(workspace, state_dir) as watch:
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", writer, str(workspace)], check=True)
        wait_until_created(state_dir, expected, timeout=180)
        elapsed = time.monotonic() - started
        assert watch.process.poll() is None
    events = file_events(state_dir)
    counts = Counter(e["file_path"] for e in events)
    assert set(counts) == expected
    assert max(counts.values()) == 1
    print(f"10,000 files in 500 new directories recorded in {elapsed:.1f} s")


def test_a_file_created_and_deleted_at_once_leaves_nothing(
    repo: Repo, workspace: Path, state_dir: Path
) -> None:
    script = "; ".join(f"echo x > t{i}.txt; rm t{i}.txt" for i in range(5))
    with watching(workspace, state_dir):
        subprocess.run(["sh", "-c", script], cwd=workspace, check=True)
        (workspace / "after.txt").write_text("marker\n")
        wait_until(lambda: "after.txt" in recorded_paths(state_dir))
        time.sleep(1.0)
    assert [e["file_path"] for e in file_events(state_dir)] == ["after.txt"]
    assert recorded_paths(state_dir) == repo.files()


def test_a_name_that_is_not_utf8_is_refused_and_the_watcher_lives_on(
    workspace: Path, state_dir: Path
) -> None:
    bad = os.path.join(os.fsencode(workspace), b"bad\xff.txt")
    with watching(workspace, state_dir) as watch:
        with open(bad, "wb") as out:
            out.write(b"x\n")
        (workspace / "next.txt").write_text("ordinary\n")
        wait_until(lambda: "next.txt" in recorded_paths(state_dir))
        with open(bad, "ab") as out:  # the next change to the odd file
            out.write(b"y\n")
        (workspace / "later.txt").write_text("ordinary\n")
        wait_until(lambda: "later.txt" in recorded_paths(state_dir))
        assert watch.process.poll() is None
    assert sorted(e["file_path"] for e in file_events(state_dir)) == ["later.txt", "next.txt"]
    errors = (state_dir / "integration-errors.jsonl").read_text()
    assert "path_not_utf8" in errors


def test_directories_fifos_and_temp_files_are_not_file_events(
    repo: Repo, workspace: Path, state_dir: Path
) -> None:
    with watching(workspace, state_dir):
        (workspace / "d").mkdir()
        os.mkfifo(workspace / "fifo")
        os.mkfifo(workspace / "d" / "pipe")
        (workspace / "d" / "sub").mkdir()
        # CPython's bytecode write: a temp name, then a rename onto the real file
        temp = workspace / "m.cpython-311.pyc.140683554367488"
        temp.write_bytes(b"\x00bytecode")
        temp.rename(workspace / "m.cpython-311.pyc")
        (workspace / ".m.py.swp").write_bytes(b"vim")
        (workspace / "after.txt").write_text("marker\n")
        wait_until(lambda: "after.txt" in recorded_paths(state_dir))
        time.sleep(1.0)
    events = file_events(state_dir)
    assert sorted(e["file_path"] for e in events) == ["after.txt", "m.cpython-311.pyc"]
    assert recorded_paths(state_dir) == repo.files() - {".m.py.swp"}  # Git lists it


def test_changes_made_while_stopped_are_reported_once_at_start(
    workspace: Path, state_dir: Path
) -> None:
    (workspace / "kept.txt").write_text("before the first start: the baseline\n")
    with watching(workspace, state_dir):
        (workspace / "a.txt").write_text("a\n")
        (workspace / "b.txt").write_text("b\n")
        wait_until(lambda: {"a.txt", "b.txt"} <= recorded_paths(state_dir))
    # while nothing records
    (workspace / "c.txt").write_text("created while stopped\n")
    (workspace / "a.txt").write_text("changed while stopped\n")
    (workspace / "b.txt").unlink()
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
         "--allow-empty", "-m", "made while stopped"],
        cwd=workspace, check=True,
    )  # fmt: skip
    with watching(workspace, state_dir) as watch:
        wait_until(lambda: "c.txt" in recorded_paths(state_dir))
        wait_until(lambda: sum(line.startswith("drift") for line in watch.lines()) == 2)
        time.sleep(1.0)
        printed = watch.lines()
    assert [e["file_path"] for e in file_events(state_dir)] == ["a.txt", "b.txt", "c.txt"]
    assert any(line.split()[:3] == ["file_update", "created", "c.txt"] for line in printed)
    # the Git catch-up is printed too
    assert any(line.split()[:2] == ["git", "commit"] for line in printed)
    assert sorted(line.split()[1:] for line in printed if line.startswith("drift")) == [
        ["deleted", "b.txt"],
        ["modified", "a.txt"],
    ]
    with watching(workspace, state_dir) as watch:  # a third start reports nothing again
        time.sleep(2.0)
        assert not any(line.startswith("file_update") for line in watch.lines())
    assert len(file_events(state_dir)) == 3


async def test_serve_catches_up_files_created_while_it_was_stopped(
    workspace: Path, state_dir: Path
) -> None:
    (workspace / "old.txt").write_text("there before the first start: the baseline\n")
    async with lsp_session(workspace, state_dir) as session:
        session.save("src/a.py", "a\n")
        await session.wait_for_events(1)
    (workspace / "src" / "new.py").write_text("created while the editor was closed\n")
    async with lsp_session(workspace, state_dir) as session:
        events = await session.wait_for_events(2, settle=1.0)
    assert [(e["payload"]["file_path"], e["payload"]["change_type"]) for e in events] == [
        ("src/a.py", "created"),
        ("src/new.py", "created"),
    ]

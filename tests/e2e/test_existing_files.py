"""Issue 30: the file events of a repository that already has files and history when the
daemon starts are true from the first minute. Real ``mplp-lsp watch`` and ``serve`` processes
at real speed, real git and real tools (sed, mv, rsync, rm, ln, compileall) do the writing;
the store and the file system are compared afterwards.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from benchlib.jsonrpc_client import RawClient
from mplp_lsp.cli.outbox import EXIT_NO_STORE
from mplp_lsp.sources.birth_time import birth_ns
from tests.e2e.harness import file_events, read_events, recorded_paths, server_env, watching
from tests.e2e.nvim_session import run
from tests.gitrepo import Repo
from tests.required import unavailable
from tests.support.waiting import wait_until, wait_until_async

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux only"),
]


def changes(state_dir: Path) -> list[tuple[str, str]]:
    return [(e["file_path"], e["change_type"]) for e in file_events(state_dir)]


def stored(state_dir: Path, expected: set[tuple[str, str]]) -> bool:
    return expected <= set(changes(state_dir))


def commit_tree(repo: Repo, top: str, dirs: int, files: int) -> set[str]:
    """``dirs`` folders of ``files`` files under ``top``, committed before any daemon runs."""
    names = set()
    for d in range(dirs):
        for f in range(files):
            name = f"{top}/d{d}/f{f}.py"
            repo.write(name, f"VALUE = {d * files + f}\n")
            names.add(name)
    repo.git("add", "--", top)
    repo.git("commit", "-q", "-m", f"add {top}")
    return names


def test_the_graph_learns_every_file_without_an_event_per_file(repo: Repo, state_dir: Path) -> None:
    with watching(repo.path, state_dir):
        wait_until(lambda: recorded_paths(state_dir) == repo.files())
        time.sleep(1.0)
    assert file_events(state_dir) == []
    [baseline] = read_events(state_dir, "graph_update")
    assert baseline["update_kind"] == "bulk"
    assert baseline["node_delta"] == len(repo.files())
    with watching(repo.path, state_dir):  # a second start learns nothing new
        time.sleep(2.0)
    assert len(read_events(state_dir, "graph_update")) == 1


def test_every_file_there_before_the_start_is_deleted_however_it_goes(
    repo: Repo, state_dir: Path
) -> None:
    tree = commit_tree(repo, "vendor", 3, 100)
    gone = {"README.md", "docs/guide.md", "src/staged.py", *tree}
    with watching(repo.path, state_dir):
        wait_until(lambda: "vendor/d2/f99.py" in recorded_paths(state_dir))
        (repo.path / "README.md").unlink()  # rm
        repo.git("rm", "-q", "docs/guide.md")
        repo.git("rm", "-q", "--cached", "src/staged.py")
        (repo.path / "src/staged.py").unlink()
        subprocess.run(["rm", "-rf", "vendor"], cwd=repo.path, check=True)
        wait_until(lambda: stored(state_dir, {(path, "deleted") for path in gone}))
        time.sleep(1.0)
    assert Counter(changes(state_dir)) == Counter((path, "deleted") for path in gone)
    assert recorded_paths(state_dir) == repo.files()


def test_a_file_rewritten_through_a_temporary_file_is_modified(
    repo: Repo, state_dir: Path, tmp_path: Path
) -> None:
    if shutil.which("rsync") is None:
        unavailable("rsync is not installed")
    source = tmp_path / "elsewhere"
    source.mkdir()
    (source / "notes.md").write_text("notes, synced from elsewhere\n")
    rewritten = {"src/app.py", "src/util.py", "docs/notes.md", "scratch.txt"}
    with watching(repo.path, state_dir):
        wait_until(lambda: repo.files() <= recorded_paths(state_dir))
        subprocess.run(["sed", "-i", "s/util/helpers/", "src/app.py"], cwd=repo.path, check=True)
        (repo.path / "src/util.py.new").write_text("def greet(name):\n    return name\n")
        subprocess.run(["mv", "src/util.py.new", "src/util.py"], cwd=repo.path, check=True)
        subprocess.run(
            ["rsync", "-rc", f"{source}/notes.md", "docs/notes.md"], cwd=repo.path, check=True
        )
        subprocess.run(["sed", "-i", "s/untracked/kept/", "scratch.txt"], cwd=repo.path, check=True)
        wait_until(lambda: stored(state_dir, {(path, "modified") for path in rewritten}))
        time.sleep(1.0)
    assert sorted(changes(state_dir)) == sorted((path, "modified") for path in rewritten)


def test_bytecode_python_writes_for_new_modules_is_created(repo: Repo, state_dir: Path) -> None:
    with watching(repo.path, state_dir):
        wait_until(lambda: repo.files() <= recorded_paths(state_dir))
        (repo.path / "lib").mkdir()
        for name in ("alpha", "beta", "gamma"):
            (repo.path / "lib" / f"{name}.py").write_text(f"NAME = {name!r}\n")
        wait_until(lambda: len(file_events(state_dir)) == 3)
        subprocess.run([sys.executable, "-m", "compileall", "-q", "lib"], cwd=repo.path, check=True)
        bytecode = {str(path.relative_to(repo.path)) for path in (repo.path / "lib").rglob("*.pyc")}
        assert len(bytecode) == 3
        wait_until(lambda: bytecode <= {path for path, _ in changes(state_dir)})
        time.sleep(1.0)
    assert sorted(change for change in changes(state_dir) if change[0] in bytecode) == sorted(
        (path, "created") for path in bytecode
    )


def test_no_rename_without_evidence_of_identity(repo: Repo, state_dir: Path) -> None:
    for name in ("f191.py", "f192.py", "notes.md", "linked.py"):
        repo.write(name, f"# {name}\n")
    repo.git("add", "--", "f191.py", "f192.py", "notes.md", "linked.py")
    repo.git("commit", "-q", "-m", "files to replace")
    with watching(repo.path, state_dir):
        wait_until(lambda: repo.files() <= recorded_paths(state_dir))
        script = (
            "rm notes.md; echo x > main.py; "  # a delete and an unrelated create
            "rm f191.py; ln -s f192.py f191.py; "  # a file replaced by a link to another
            "ln -sf README.md linked.py"  # a link forced over a file
        )
        subprocess.run(["sh", "-c", script], cwd=repo.path, check=True)
        expected = {
            ("notes.md", "deleted"),
            ("main.py", "created"),
            ("f191.py", "deleted"),
            ("linked.py", "deleted"),
        }
        wait_until(lambda: stored(state_dir, expected))
        time.sleep(1.5)
    assert sorted(changes(state_dir)) == sorted(expected)
    assert not any("previous_path" in e for e in file_events(state_dir))


def test_a_moved_directory_is_one_rename_per_file(repo: Repo, state_dir: Path) -> None:
    tree = commit_tree(repo, "pkg", 2, 25)
    with watching(repo.path, state_dir):
        wait_until(lambda: tree <= recorded_paths(state_dir))
        (repo.path / "pkg").rename(repo.path / "lib")
        moved = {name.replace("pkg/", "lib/", 1) for name in tree}
        wait_until(lambda: moved <= {path for path, _ in changes(state_dir)})
        time.sleep(1.0)
    events = file_events(state_dir)
    assert sorted((e["file_path"], e["change_type"], e["previous_path"]) for e in events) == sorted(
        (name.replace("pkg/", "lib/", 1), "renamed", name) for name in tree
    )


def test_an_overflow_records_only_what_changed(repo: Repo, state_dir: Path) -> None:
    """The kernel's queue overflows while the watcher is stopped (SIGSTOP): every file is
    compared with the graph again, and only the one that changed is an event."""
    tree = commit_tree(repo, "many", 5, 100)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    target = repo.path / "src/app.py"
    with watching(repo.path, state_dir) as watch:
        wait_until(lambda: tree <= recorded_paths(state_dir))
        watch.process.send_signal(signal.SIGSTOP)
        try:
            for i in range(limit // 2 + 100):  # MODIFY, CLOSE_WRITE: never merged
                with target.open("a") as out:
                    out.write(f"# {i}\n")
        finally:
            watch.process.send_signal(signal.SIGCONT)
        wait_until(lambda: ("src/app.py", "modified") in changes(state_dir))
        time.sleep(2.0)
        assert "overflow" in watch.logged()
    assert changes(state_dir) == [("src/app.py", "modified")]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_watch_stores_a_write_it_saw_before_a_signal(
    repo: Repo, state_dir: Path, signum: int
) -> None:
    with watching(repo.path, state_dir) as watch:
        (repo.path / "src/util.py").write_text("def greet(name):\n    return name\n")
        (repo.path / "src/new.py").write_text("NEW = 1\n")
        time.sleep(0.1)  # seen, and well inside the 500 ms quiet period
        assert watch.stop(signum, timeout=20) in (0, 130)
    assert sorted(changes(state_dir)) == [("src/new.py", "created"), ("src/util.py", "modified")]


def serve_argv(state_dir: Path | None = None) -> list[str]:
    """``serve`` recording into ``state_dir``, else each folder's store in its default place."""
    where = [] if state_dir is None else ["--state-dir", str(state_dir)]
    return [sys.executable, "-m", "mplp_lsp", "serve", *where]


async def started_serve(workspace: Path, state_dir: Path) -> RawClient:
    client = RawClient()
    await client.start(*serve_argv(state_dir), env=server_env())
    await client.initialize(workspace.as_uri(), {"mplp": {}})  # the default quiet period
    while not (await client.request("mplp/status"))["ready"]:
        await asyncio.sleep(0.05)
    return client


def saved(client: RawClient, path: Path, text: str) -> None:
    uri = {"textDocument": {"uri": path.as_uri()}}
    client.notify("textDocument/willSave", {**uri, "reason": 1})
    path.write_text(text)
    client.notify("textDocument/didSave", uri)


async def ended(client: RawClient, end: str) -> int:
    process = client.process
    assert process is not None and process.stdin is not None
    if end == "exit":  # the editor quits without waiting for anything
        client.notify("exit", None)
    elif end == "eof":
        process.stdin.close()
    else:
        process.send_signal(getattr(signal, end))
    return await asyncio.wait_for(process.wait(), 20)


@pytest.mark.parametrize("end", ["SIGTERM", "SIGHUP", "SIGINT", "exit", "eof"])
async def test_serve_stores_a_save_it_was_told_of_before_it_ends(
    workspace: Path, state_dir: Path, end: str
) -> None:
    client = await started_serve(workspace, state_dir)
    saved(client, workspace / "src/app.py", "print('saved')\n")
    saved(client, workspace / "src/created.py", "CREATED = 1\n")
    await client.request("mplp/status")  # both saves were taken in
    await asyncio.sleep(0.1)
    await ended(client, end)
    assert sorted(changes(state_dir)) == [("src/app.py", "modified"), ("src/created.py", "created")]


async def test_a_cancelled_save_stores_nothing(workspace: Path, state_dir: Path) -> None:
    client = await started_serve(workspace, state_dir)
    for name in ("src/never.py", "src/app.py"):  # a new file, and one that exists
        uri = {"textDocument": {"uri": (workspace / name).as_uri()}}
        client.notify("textDocument/willSave", {**uri, "reason": 1})
    saved(client, workspace / "src/after.py", "AFTER = 1\n")
    await client.request("mplp/status")
    await asyncio.sleep(1.5)  # three quiet periods
    await client.stop()
    assert changes(state_dir) == [("src/after.py", "created")]
    assert "src/never.py" not in recorded_paths(state_dir)


async def test_changes_made_while_serve_starts_are_recorded(repo: Repo, state_dir: Path) -> None:
    """The first baseline is cut when the server process started, not when the folder
    opened: what another program writes while the server starts is a change, not a file
    that was there (a tracked file rewritten through a rename is still ``modified``)."""
    workspace = repo.path
    untouched = repo.files() - {"src/util.py", "README.md", "scratch.txt"}
    client = RawClient()
    await client.start(*serve_argv(state_dir), env=server_env())
    # The process runs (its interpreter starts for far longer than this: the writes come
    # a few clock ticks after the process began); its folder opens at initialize, after them.
    await asyncio.sleep(0.1)
    sed = await asyncio.create_subprocess_exec(
        "sed", "-i", "s/hello/hi/", "src/util.py", cwd=workspace
    )
    assert await sed.wait() == 0
    with (workspace / "README.md").open("a") as readme:  # written in place
        readme.write("more\n")
    (workspace / "scratch.txt").write_text("rewritten\n")  # untracked, born before the start
    (workspace / "src/during.py").write_text("DURING = 1\n")
    await client.initialize(workspace.as_uri(), {"mplp": {"debounceMs": 100}})
    expected = {
        ("README.md", "modified"),
        ("src/util.py", "modified"),
        ("src/during.py", "created"),
        # where the file system records no birth time, an untracked file cannot be told
        # from a new one (docs/daemon.md, the baseline's limits)
        ("scratch.txt", "modified" if birth_ns(str(workspace / "scratch.txt")) else "created"),
    }
    try:
        await wait_until_async(lambda: stored(state_dir, expected), timeout=30)
        await asyncio.sleep(1.0)  # an extra event would land now
    finally:
        await client.stop()
    assert sorted(changes(state_dir)) == sorted(expected)
    assert untouched <= recorded_paths(state_dir)  # learnt, with no event of their own


@pytest.mark.parametrize("held", [True, False])
async def test_a_change_the_client_held_for_a_server_not_started_yet_is_recorded(
    repo: Repo, state_dir: Path, held: bool
) -> None:
    """A client that held the editor's activity since before the server process started
    (the VS Code extension checks the interpreter first) says since when; a file changed
    in between is a change on the first start, not a file that was there. Without that
    option, the same change is learnt as it is, with no event."""
    since_ms = time.time_ns() // 1_000_000
    await asyncio.sleep(0.05)  # a few clock ticks: the change is younger than the moment held since
    (repo.path / "src/util.py").write_text("saved while the server was not running yet\n")
    await asyncio.sleep(0.05)
    client = RawClient()
    await client.start(*serve_argv(state_dir), env=server_env())
    options: dict[str, object] = {"mplp": {"debounceMs": 100}}
    if held:
        options["heldSince"] = since_ms
    try:
        await client.initialize(repo.path.as_uri(), options)
        await wait_until_async(lambda: recorded_paths(state_dir) == repo.files(), timeout=30)
        await asyncio.sleep(1.0)  # an event would land now
    finally:
        await client.stop()
    assert changes(state_dir) == ([("src/util.py", "modified")] if held else [])


def daemon_env(tmp_path: Path) -> dict[str, str]:
    """Stores in their default place, under this test's own state home."""
    return {"XDG_STATE_HOME": str(tmp_path / "xdg-state")}


def mplp(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", *args],
        cwd=cwd, env=server_env(env), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def state_folders(tmp_path: Path) -> list[str]:
    folder = tmp_path / "xdg-state" / "mplp-lsp" / "workspaces"
    return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


async def test_a_folder_added_later_is_cut_when_it_was_added(repo: Repo, tmp_path: Path) -> None:
    """A folder the editor adds while the server runs was not heard of before: a file
    changed in it before it was added is learnt as it is (no event), like a file changed
    before the server started; what changes once it is recorded is an event."""
    env = daemon_env(tmp_path)
    other = Repo.existing(tmp_path / "other")
    client = RawClient()
    await client.start(*serve_argv(), env=server_env(env))
    try:
        await client.initialize(repo.path.as_uri(), {"mplp": {"debounceMs": 100}})
        while not (await client.request("mplp/status"))["ready"]:
            await asyncio.sleep(0.05)
        (other.path / "src/util.py").write_text("changed before the folder was added\n")
        await asyncio.sleep(0.1)  # a few clock ticks: the change is older than the add
        folder = {"uri": other.path.as_uri(), "name": "other"}
        client.notify(
            "workspace/didChangeWorkspaceFolders", {"event": {"added": [folder], "removed": []}}
        )
        state = await store_of(client, other.path)
        await wait_until_async(lambda: recorded_paths(state) == other.files())
        saved(client, other.path / "src/new.py", "NEW = 1\n")
        await wait_until_async(lambda: stored(state, {("src/new.py", "created")}), timeout=30)
        await asyncio.sleep(1.0)  # an extra event would land now
    finally:
        await client.stop()
    assert changes(state) == [("src/new.py", "created")]


async def store_of(client: RawClient, root: Path) -> Path:
    """The state dir of the folder ``root`` once the server records it."""
    while True:
        status = await client.request("mplp/status")
        for folder in status["workspaces"]:
            if folder["root"] == str(root) and folder.get("role") == "owner":
                return Path(folder["state_dir"])
        await asyncio.sleep(0.05)


def test_status_from_a_subdirectory_reads_the_daemon_recording_the_repository(
    repo: Repo, tmp_path: Path
) -> None:
    import json

    env = daemon_env(tmp_path)
    with watching(repo.path, None, env=env, api=True) as watch:
        (repo.path / "src/pkg/model.py").write_text("class Model:\n    name = 'm'\n")
        [folder] = state_folders(tmp_path)
        state = tmp_path / "xdg-state" / "mplp-lsp" / "workspaces" / folder
        wait_until(lambda: ("src/pkg/model.py", "modified") in changes(state))
        done = mplp("status", "--json", cwd=repo.path / "src" / "pkg", env=env)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        listed = mplp("events", "--kind", "file_update", cwd=repo.path / "tests", env=env)
        assert listed.returncode == 0, listed.stderr
        assert watch.process.poll() is None
    assert report["workspace"] == str(repo.path)
    assert report["daemon"]["pid"] == watch.process.pid
    assert report["events_by_kind"]["file_update"] == 1
    assert "src/pkg/model.py" in listed.stdout
    assert str(repo.path) in listed.stderr  # it says which workspace it read
    assert state_folders(tmp_path) == [folder]  # no store of its own for a subdirectory


def test_a_read_only_command_outside_any_workspace_creates_no_state(tmp_path: Path) -> None:
    env = daemon_env(tmp_path)
    plain = tmp_path / "plain" / "deeper"
    plain.mkdir(parents=True)
    for command in (["status"], ["events"], ["drift"], ["outbox", "dead"]):
        done = mplp(*command, cwd=plain, env=env)
        assert done.returncode in (0, EXIT_NO_STORE), (command, done.stderr)
        assert str(plain) in done.stdout + done.stderr, command
    assert state_folders(tmp_path) == []


SAVE_THEN_QUIT = r"""
require('mplp').setup({ python = PYTHON })  -- the default quiet period: 500 ms
vim.cmd('edit ' .. ROOT .. '/src/app.py')
local buf = vim.api.nvim_get_current_buf()
local client = client_of(buf)
if not client or not ready(client, buf) then return finish(3) end
save(buf, 'print("edited in Neovim")')
vim.cmd('edit ' .. ROOT .. '/src/brand_new.py')
local new = vim.api.nvim_get_current_buf()
if not client_of(new) then return finish(4) end
save(new, 'NEW = 1')
step('saved')
finish(0)  -- :qall at once, well inside the quiet period
"""


def test_neovim_writes_then_quits_and_both_writes_are_true(repo: Repo, tmp_path: Path) -> None:
    """A file that was there is ``modified``, a new one ``created``, and neither is lost
    though Neovim quits right after writing them."""
    state = tmp_path / "state"
    session = run(
        tmp_path,
        "save-quit",
        SAVE_THEN_QUIT,
        {"ROOT": str(repo.path), "STATE": str(state)},
        cwd=repo.path,
        env={"MPLP_LSP_STATE_DIR": str(state)},
    )
    assert session.result["steps"] == ["saved"], (session.returncode, session.stderr[-2000:])
    expected = [("src/app.py", "modified"), ("src/brand_new.py", "created")]
    wait_until(lambda: sorted(changes(state)) == expected, timeout=30)
    time.sleep(1.0)
    assert sorted(changes(state)) == expected

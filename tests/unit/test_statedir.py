"""State dir resolution and the one-writer lock, checked across real processes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from mplp_lsp.engine.private import NotPrivate
from mplp_lsp.engine.statedir import (
    DATABASE_NAME,
    ERROR_LOG_NAME,
    LOCK_NAME,
    STATE_DIR_ENV,
    StateDirLock,
    StateDirLocked,
    StatePaths,
    default_state_dir,
    resolve_state_dir,
)

SERVER = Path(__file__).resolve().parents[2] / "server"
linux_only = pytest.mark.skipif(
    sys.platform != "linux", reason="XDG_STATE_HOME drives platformdirs on Linux only"
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "my-app"
    folder.mkdir(parents=True)
    return folder


@linux_only
def test_default_state_dir_layout(state_home: Path, workspace: Path) -> None:
    digest = hashlib.sha256(str(workspace.resolve()).encode()).hexdigest()[:12]
    expected = state_home / "mplp-lsp" / "workspaces" / f"my-app-{digest}"
    assert default_state_dir(workspace) == expected


def test_default_state_dir_follows_symlinks(state_home: Path, workspace: Path) -> None:
    link = workspace.parent / "link-to-app"
    link.symlink_to(workspace, target_is_directory=True)
    assert default_state_dir(link) == default_state_dir(workspace)


def test_same_folder_name_in_two_places_gets_two_dirs(state_home: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "app", tmp_path / "b" / "app"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    assert default_state_dir(one) != default_state_dir(two)


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("My Project (v2)!", "My-Project-v2"),
        ("naïve café", "na-ve-caf"),
        (".hidden", "hidden"),
        ("日本語", "workspace"),
        ("x" * 80, "x" * 40),
    ],
)
def test_slug_is_safe_and_short(state_home: Path, tmp_path: Path, name: str, slug: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    leaf = default_state_dir(folder).name
    assert re.fullmatch(r"[A-Za-z0-9._-]{1,40}-[0-9a-f]{12}", leaf)
    assert leaf.rsplit("-", 1)[0] == slug


def test_precedence_flag_then_env_then_default(
    state_home: Path, workspace: Path, tmp_path: Path
) -> None:
    flag, env_dir = tmp_path / "from-flag", tmp_path / "from-env"
    env = {STATE_DIR_ENV: str(env_dir)}
    assert resolve_state_dir(workspace, flag, env) == flag
    assert resolve_state_dir(workspace, None, env) == env_dir
    assert resolve_state_dir(workspace, None, {}) == default_state_dir(workspace)
    assert resolve_state_dir(workspace, "", {STATE_DIR_ENV: ""}) == default_state_dir(workspace)
    assert flag.is_dir() and env_dir.is_dir()


def test_env_var_is_read_from_the_process_by_default(
    state_home: Path, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "from-env"))
    assert resolve_state_dir(workspace) == tmp_path / "from-env"


def test_relative_override_becomes_absolute(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    resolved = resolve_state_dir(workspace, "relative/state", {})
    assert resolved == tmp_path / "relative" / "state"
    assert resolved.is_absolute() and resolved.is_dir()


def test_created_dirs_are_private_even_with_a_permissive_umask(
    state_home: Path, workspace: Path
) -> None:
    state_home.mkdir(mode=0o755)
    state_home.chmod(0o755)
    old = os.umask(0)
    try:
        resolved = resolve_state_dir(workspace, None, {})
    finally:
        os.umask(old)
    assert mode(resolved) == 0o700
    assert mode(resolved.parent) == 0o700  # workspaces/, created here
    assert mode(state_home / "mplp-lsp") == 0o700
    assert mode(state_home) == 0o755  # existed before: left alone


@pytest.mark.parametrize("bits", [0o002, 0o020, 0o1002])
def test_a_state_dir_others_can_write_is_refused_with_the_path_and_the_fix(
    workspace: Path, tmp_path: Path, bits: int
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    state.chmod(0o700 | bits)
    with pytest.raises(NotPrivate, match=re.escape(f"chmod go-w {state}")):
        resolve_state_dir(workspace, state, {})


def test_a_folder_above_it_that_others_can_write_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(NotPrivate, match=re.escape(f"{shared} is writable by others")):
        resolve_state_dir(workspace, shared / "mine" / "state", {})
    # A sticky folder (/tmp's kind) is where the walk stops: nobody can swap our entries.
    shared.chmod(0o1777)
    assert resolve_state_dir(workspace, shared / "mine" / "state", {}).is_dir()


def test_a_link_to_a_folder_others_can_write_is_judged_by_its_target(
    workspace: Path, tmp_path: Path
) -> None:
    target = tmp_path / "open"
    target.mkdir()
    target.chmod(0o777)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(NotPrivate, match="writable by others"):
        resolve_state_dir(workspace, tmp_path / "link", {})


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_state_dir_of_another_user_is_refused(workspace: Path, tmp_path: Path) -> None:
    state = tmp_path / "theirs"
    state.mkdir(mode=0o755)
    os.chown(state, 54321, 54321)  # nobody's: any uid but ours
    with pytest.raises(NotPrivate, match=re.escape(f"{state} belongs to uid 54321")):
        resolve_state_dir(workspace, state, {})
    above = tmp_path / "their-folder"
    above.mkdir(mode=0o755)
    (above / "state").mkdir(mode=0o700)
    os.chown(above, 54321, 54321)
    with pytest.raises(NotPrivate, match=re.escape(f"inside {above}, which belongs to uid 54321")):
        resolve_state_dir(workspace, above / "state", {})


def test_state_paths() -> None:
    paths = StatePaths(Path("state"))
    assert paths.database == Path("state") / DATABASE_NAME == Path("state/events.db")
    assert paths.error_log == Path("state/integration-errors.jsonl") == paths.root / ERROR_LOG_NAME
    assert paths.lock == Path("state/daemon.lock") == paths.root / LOCK_NAME


# -- the lock ------------------------------------------------------------------------------


@pytest.fixture
def paths(tmp_path: Path) -> StatePaths:
    root = tmp_path / "state"
    root.mkdir()
    return StatePaths(root)


@pytest.fixture
def lock(paths: StatePaths, workspace: Path) -> Iterator[StateDirLock]:
    held = StateDirLock(paths.lock, workspace=workspace)
    yield held
    held.release()


def test_acquire_writes_owner(lock: StateDirLock, paths: StatePaths, workspace: Path) -> None:
    assert lock.owner() is None
    assert lock.acquire()
    assert lock.acquire()  # re-acquiring what it holds is a no-op
    owner = lock.owner()
    assert owner is not None
    assert owner["pid"] == os.getpid()
    assert owner["workspace"] == str(workspace)
    assert owner["argv0"] == sys.argv[0]
    datetime.fromisoformat(owner["started_at"])
    assert json.loads(paths.lock.read_text()) == owner
    assert mode(paths.lock) == 0o600


def test_two_instances_in_one_process_conflict(lock: StateDirLock, paths: StatePaths) -> None:
    assert lock.acquire()
    other = StateDirLock(paths.root)  # the directory form finds daemon.lock inside
    assert other.path == paths.lock
    assert not other.acquire()
    owner = other.owner()
    assert owner is not None and owner["pid"] == os.getpid()
    lock.release()
    assert other.acquire()
    assert not lock.acquire()
    other.release()


def test_flock_alone_separates_open_file_descriptions(paths: StatePaths) -> None:
    """The property the in-process registry only backs up: flock is per open file."""
    import fcntl

    first = os.open(paths.lock, os.O_RDWR | os.O_CREAT)
    second = os.open(paths.lock, os.O_RDWR)
    try:
        fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BlockingIOError):
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(first)
        os.close(second)


def test_release_clears_owner_and_is_idempotent(lock: StateDirLock, paths: StatePaths) -> None:
    assert lock.acquire()
    lock.release()
    lock.release()
    assert lock.owner() is None
    assert paths.lock.read_text() == ""
    assert not lock.held


def test_stale_owner_file_is_not_an_owner(paths: StatePaths) -> None:
    paths.lock.write_text(json.dumps({"pid": 999999, "started_at": "x"}))
    lock = StateDirLock(paths.lock)
    assert lock.owner() is None
    assert lock.acquire()
    owner = lock.owner()
    assert owner is not None and owner["pid"] == os.getpid()
    lock.release()


def test_context_manager(paths: StatePaths) -> None:
    with StateDirLock(paths.lock) as held:
        assert held.held
        with pytest.raises(StateDirLocked) as raised, StateDirLock(paths.lock):
            pass
        assert raised.value.owner is not None
        assert raised.value.owner["pid"] == os.getpid()
    assert StateDirLock(paths.lock).acquire()


HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mplp_lsp.engine.statedir import StateDirLock
    lock = StateDirLock(Path(sys.argv[1]), workspace="child-workspace")
    print("locked" if lock.acquire() else "busy", flush=True)
    sys.stdin.read()  # hold until the parent closes our stdin (or kills us)
    lock.release()
    """
)


def spawn_holder(lock_path: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER), env.get("PYTHONPATH")]))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    return child


def finish(child: subprocess.Popen[str]) -> None:
    if child.poll() is None:
        child.kill()
    child.wait(timeout=60)
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()


def test_lock_conflicts_across_processes(paths: StatePaths) -> None:
    child = spawn_holder(paths.lock)
    try:
        mine = StateDirLock(paths.lock)
        assert not mine.acquire()
        owner = mine.owner()
        assert owner is not None
        assert owner["pid"] == child.pid
        assert owner["workspace"] == "child-workspace"
        assert child.stdin is not None
        child.stdin.close()  # the holder releases and exits
        assert child.wait(timeout=60) == 0
        assert mine.acquire()
        mine.release()
    finally:
        finish(child)


def test_kernel_releases_the_lock_of_a_killed_holder(paths: StatePaths) -> None:
    child = spawn_holder(paths.lock)
    try:
        mine = StateDirLock(paths.lock)
        assert not mine.acquire()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        assert mine.owner() is None  # its details are still in the file, but it is gone
        assert mine.acquire()
        mine.release()
    finally:
        finish(child)


def test_child_is_refused_while_parent_holds(paths: StatePaths) -> None:
    with StateDirLock(paths.lock, workspace="parent-workspace"):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER), env.get("PYTHONPATH")]))
        done = subprocess.run(
            [sys.executable, "-c", HOLDER, str(paths.lock)],
            input="",
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        assert done.stdout.strip() == "busy"


def test_a_chosen_state_dir_is_the_store_of_the_first_workspace_that_writes_it(
    state_home: Path, tmp_path: Path
) -> None:
    repo, other = tmp_path / "repo", tmp_path / "other"
    repo.mkdir()
    other.mkdir()
    shared = {STATE_DIR_ENV: str(tmp_path / "shared")}
    chosen = resolve_state_dir(repo, None, shared)
    with StateDirLock(chosen / LOCK_NAME, workspace=repo):
        pass
    assert (chosen / "workspace").read_text().strip() == str(repo.resolve())
    assert resolve_state_dir(repo, None, shared) == chosen
    own = resolve_state_dir(other, None, shared)
    assert own.parent == chosen / "workspaces"
    assert own.name == default_state_dir(other).name
    with StateDirLock(own / LOCK_NAME, workspace=other):
        pass
    assert resolve_state_dir(other, None, shared) == own  # and it stays there
    assert resolve_state_dir(repo, tmp_path / "shared", {}) == chosen  # --state-dir alike


def test_a_state_dir_held_for_another_workspace_is_not_shared(
    state_home: Path, tmp_path: Path
) -> None:
    """A store from before the ``workspace`` file: its holder's lock details decide."""
    repo, other = tmp_path / "repo", tmp_path / "other"
    repo.mkdir()
    other.mkdir()
    chosen = tmp_path / "shared"
    chosen.mkdir()
    lock = StateDirLock(chosen / LOCK_NAME, workspace=repo)
    assert lock.acquire()
    try:
        (chosen / "workspace").unlink()
        assert resolve_state_dir(other, chosen, {}).parent == chosen / "workspaces"
        assert resolve_state_dir(repo, chosen, {}) == chosen
    finally:
        lock.release()
    # free and unnamed: whoever writes it first
    assert resolve_state_dir(other, chosen, {}) == chosen

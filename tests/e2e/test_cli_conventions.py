"""The command line behaves like the tools people like, as real processes in a repository that
has files and history: a setting can be switched off for one run, what is typed is checked
strictly, a mistyped command gets the closest one, completion scripts load in the shells, well-
known tools get their kind, a store on a read-only disk can be read, a remote that refuses
connections does not hold the caller, what was queued for one remote is not sent to the next
one, and errors name the path and what to do."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import watch_argv
from tests.gitrepo import Repo
from tests.required import unavailable
from tests.support.collector import TOKEN, Collector

pytestmark = pytest.mark.e2e


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A repository that has files and history before any mplp-lsp process runs."""
    repo = Repo.create(tmp_path / "project")
    (repo.path / "src").mkdir()
    (repo.path / "src" / "app.py").write_text("print('app')\n")
    repo.git("add", ".")
    repo.git("commit", "-q", "-m", "app")
    repo.commit("second")
    return repo


def mplp(
    repo: Repo, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", *args],
        cwd=repo.path,
        env={**os.environ, "MPLP_LSP_REMOTE_TOKEN": TOKEN, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def emit_ci(repo: Repo, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    ci = ("--provider", "local", "--pipeline-id", "build", "--run-id", "1", "--status", "running")
    return mplp(repo, "emit", "ci", *ci, "--state-dir", str(state), *extra)


def emit_json(repo: Repo, state: Path, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """``emit ci --json -`` with ``payload`` on standard input."""
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", "emit", "ci", "--json", "-", "--state-dir", str(state)],
        cwd=repo.path,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
    )


def events(repo: Repo, state: Path) -> list[dict[str, Any]]:
    done = mplp(repo, "events", "--json", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


# Switching a setting off for one run


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    running = Collector(tmp_path / "collector.db")
    yield running
    running.stop()


@pytest.mark.parametrize(
    ("flags", "forwarded"),
    [((), True), (("--no-remote",), False), (("--set", "remoteUrl="), False)],
    ids=["configured", "no-remote", "set-empty"],
)
def test_forwarding_is_switched_off_for_one_run(
    repo: Repo, tmp_path: Path, collector: Collector, flags: tuple[str, ...], forwarded: bool
) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "MPLP_LSP_REMOTE_URL": collector.url, "MPLP_LSP_REMOTE_TOKEN": TOKEN}
    watch = subprocess.Popen(
        [*watch_argv(repo.path, state, *flags), "--no-api"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stderr is not None
        assert "watching" in watch.stderr.readline()
        (repo.path / "src" / "new.py").write_text("x = 1\n")
        deadline = time.monotonic() + 60
        while not any(e["payload"].get("file_path") == "src/new.py" for e in events(repo, state)):
            assert time.monotonic() < deadline, "the new file was never recorded"
            time.sleep(0.2)
        # Recorded by the stand-alone watcher, and said so (an editor's events say "ide").
        file_events = [e for e in events(repo, state) if e["event_type"] == "file_update"]
        assert {e["source_module"] for e in file_events} == {"watch"}
        status = json.loads(mplp(repo, "status", "--json", "--state-dir", str(state)).stdout)
        if forwarded:
            while not collector.events():
                assert time.monotonic() < deadline, "nothing reached the collector"
                time.sleep(0.2)
        else:
            assert status["forward"] is None or status["forward"].get("remote") is None, status
    finally:
        watch.terminate()
        watch.wait(30)
    assert bool(collector.events()) is forwarded


# What is typed is checked strictly


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--set", "debounceMz=1"), "no setting is named 'debounceMz' (did you mean debounceMs?)"),
        (
            ("--set", "remoteUrl=null"),
            '--set remoteUrl: not an http:// or https:// URL (got "null")',
        ),
        (("--set", "debounceMs=soon"), "debounceMs wants JSON here, and 'soon' is not"),
        (("--set", "debounceMs"), "not KEY=VALUE"),
    ],
)
def test_a_bad_value_on_the_command_line_stops_the_command(
    repo: Repo, args: tuple[str, ...], said: str
) -> None:
    done = mplp(repo, "config", *args)
    assert done.returncode == 2, done.stdout
    assert said in done.stderr
    assert done.stderr.startswith("mplp-lsp config: ") and "Traceback" not in done.stderr


def test_a_bad_value_in_a_file_still_only_warns(repo: Repo) -> None:
    (repo.path / ".mplp-lsp.toml").write_text('debounceMs = "soon"\n')
    done = mplp(repo, "config", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["settings"]["debounceMs"]["origin"] == "default"
    assert "debounceMs: input should be a valid integer" in done.stderr


# Did you mean


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("stauts",), "mplp-lsp: unknown command 'stauts'; did you mean 'status'?"),
        (("hooks", "instal"), "mplp-lsp hooks: unknown action 'instal'; did you mean 'install'?"),
        (("events", "--jsn"), "unrecognized arguments: --jsn; did you mean '--json'?"),
    ],
)
def test_a_mistyped_command_gets_the_closest_one(
    repo: Repo, args: tuple[str, ...], said: str
) -> None:
    done = mplp(repo, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert said in done.stderr


# Completion scripts


def completions(shell: list[str], script: str, line: str) -> list[str]:
    """What ``script`` prints, a line each, given the command line typed so far."""
    done = subprocess.run(
        [*shell, script], input=line, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout.splitlines()


BASH_DRIVER = """
source <(mplp-lsp completion bash)
IFS= read -r line
read -ra COMP_WORDS <<< "$line"
[[ $line == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_mplp_lsp
printf '%s\\n' "${COMPREPLY[@]}"
"""


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mplp-lsp`` on PATH, as an installed command is."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("mplp-lsp sta", {"status"}),
        ("mplp-lsp events --kind ", {"git", "file_update", "tool", "ci"}),
        ("mplp-lsp emit ", {"git", "ci", "tool", "file"}),
        ("mplp-lsp hooks --workspace . ", {"install", "uninstall", "status"}),
        ("mplp-lsp run --kind test", {"test_runner"}),
    ],
)
def test_the_bash_completion_script_completes(line: str, offered: set[str], on_path: None) -> None:
    found = completions(["bash", "-c"], BASH_DRIVER, line)
    assert offered <= set(found), found


@pytest.mark.usefixtures("on_path")
def test_the_fish_completion_script_completes() -> None:
    if shutil.which("fish") is None:
        unavailable("fish is not installed (apt-get install fish)")
    script = "mplp-lsp completion fish | source; complete -C (cat)"
    found = [line.split("\t")[0] for line in completions(["fish", "-c"], script, "mplp-lsp hoo")]
    assert found == ["hooks"]


@pytest.mark.usefixtures("on_path")
def test_the_zsh_completion_script_loads() -> None:
    if shutil.which("zsh") is None:
        unavailable("zsh is not installed (apt-get install zsh)")
    # bash's arrays from zsh's bash layer: COMP_CWORD counts from 0, under `emulate sh`.
    script = (
        "autoload -U compinit; compinit -u; "
        'eval "$(mplp-lsp completion zsh)" || exit 3; '
        "read -r line; COMP_WORDS=(${=line}); COMP_CWORD=1; "
        'emulate sh -c _mplp_lsp; print -l "${COMPREPLY[@]}"'
    )
    assert "events" in completions(["zsh", "-c"], script, "mplp-lsp ev")


# Kinds of well-known tools


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ([sys.executable, "-m", "ruff", "--version"], "linter"),
        ([sys.executable, "-m", "pytest", "--version"], "test_runner"),
        ([sys.executable, "-c", "pass"], "other"),
    ],
)
def test_a_well_known_tool_gets_its_kind(
    repo: Repo, tmp_path: Path, command: list[str], kind: str
) -> None:
    state = tmp_path / "state"
    done = mplp(repo, "run", "--state-dir", str(state), "--", *command)
    assert done.returncode == 0, done.stderr
    tool = [e["payload"] for e in events(repo, state) if e["event_type"] == "tool_execution"]
    assert {p["tool_kind"] for p in tool} == {kind}


def test_kind_still_wins(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    command = ["--kind", "generator", "--", sys.executable, "-m", "ruff", "--version"]
    done = mplp(repo, "run", "--state-dir", str(state), *command)
    assert done.returncode == 0, done.stderr
    tool = [e["payload"] for e in events(repo, state) if e["event_type"] == "tool_execution"]
    assert {p["tool_kind"] for p in tool} == {"generator"}


# A store that cannot be written


def test_a_store_that_cannot_be_written_is_read(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert emit_ci(repo, state).returncode == 0
    as_reader: list[str] = []
    # Folders opened to the reader for the test (its own interpreter and package included:
    # CI's venv is a private temporary folder), closed again at the end.
    opened: dict[Path, int] = {}
    if os.geteuid() == 0:  # root writes anywhere: read as a user who cannot write there
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            unavailable("setpriv is not installed (util-linux)")
        as_reader = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        for top in (tmp_path, Path(sys.prefix), Path(sys.base_prefix)):
            for folder in (top, *top.parents):
                mode = folder.stat().st_mode
                if mode & 0o005 != 0o005:
                    opened.setdefault(folder, mode)
                    folder.chmod(mode | 0o005)
        os.chmod(repo.path, 0o755)
        # The reader's own store (a store of another user's is refused), on a folder it
        # cannot write: a read-only disk, as its owner sees it.
        for path in (state, *state.iterdir()):
            os.chown(path, 65534, 65534)
    os.chmod(state, 0o500)
    try:
        where = ("--workspace", str(repo.path), "--state-dir", str(state))
        done = subprocess.run(
            [*as_reader, sys.executable, "-m", "mplp_lsp", "events", "--json", *where],
            cwd="/",
            env={**os.environ, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.chmod(state, 0o755)
        for folder, mode in opened.items():
            folder.chmod(mode)
    assert done.returncode == 0, done.stderr
    assert any(json.loads(line)["event_type"] == "ci_pipeline" for line in done.stdout.splitlines())


# Errors that say what to do


def test_a_file_that_is_not_a_store_is_named_with_the_fix(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "events.db").write_text("this is not a database\n" * 100)
    done = mplp(repo, "status", "--state-dir", str(state))
    assert done.returncode != 0
    assert f"{state / 'events.db'} is not an mplp-lsp store" in done.stderr
    assert "--state-dir" in done.stderr
    assert "Error" not in done.stderr and "Traceback" not in done.stderr


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_remote_that_refuses_connections_does_not_hold_the_caller(
    repo: Repo, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    remote = f"http://127.0.0.1:{closed_port()}"
    wait = 60.0
    started = time.monotonic()
    done = emit_ci(repo, state, "--remote", remote, "--wait", str(wait))
    assert time.monotonic() - started < wait, "it waited out --wait for a closed port"
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "accepted"
    assert "cannot connect to 127.0.0.1" in done.stderr
    assert "still queued" in done.stderr


def test_what_was_queued_does_not_go_to_whichever_remote_is_configured_next(
    repo: Repo, tmp_path: Path, collector: Collector
) -> None:
    state = tmp_path / "state"
    first = f"http://127.0.0.1:{closed_port()}"
    queued = emit_ci(repo, state, "--remote", first, "--wait", "5")
    assert "still queued" in queued.stderr
    ids = {e["event_id"] for e in events(repo, state)}
    ci = ("--provider", "local", "--pipeline-id", "next", "--run-id", "2", "--status", "running")
    done = mplp(repo, "emit", "ci", *ci, "--state-dir", str(state), "--remote", collector.url)
    assert done.returncode == 0, done.stderr
    assert collector.events(), "the remote configured next got nothing"
    assert not ids & {e["event_id"] for e in collector.events()}
    listed = mplp(repo, "outbox", "held", "--json", "--state-dir", str(state))
    (held,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (held["remote"], held["count"]) == (first, len(ids))


def test_no_dead_letters_is_said(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert emit_ci(repo, state).returncode == 0
    done = mplp(repo, "outbox", "dead", "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (0, "")
    assert "no dead letters" in done.stderr
    done = mplp(repo, "outbox", "dead", "--json", "--state-dir", str(state))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_collector_ui_against_a_sqlite_collector_says_what_serves_a_team_view(
    repo: Repo, collector: Collector
) -> None:
    done = mplp(repo, "collector", "ui", collector.url, env={"MPLP_LSP_COLLECTOR_TOKEN": TOKEN})
    assert done.returncode != 0
    assert "has no team dashboard" in done.stderr and "PostgreSQL" in done.stderr, done.stderr
    assert "HTTP 404" not in done.stderr and "Traceback" not in done.stderr
    refused = mplp(
        repo, "collector", "ui", collector.url, env={"MPLP_LSP_COLLECTOR_TOKEN": "wrong"}
    )
    assert "refused the token" in refused.stderr, refused.stderr


def test_hooks_status_has_json_and_says_what_install_changed(repo: Repo, tmp_path: Path) -> None:
    state = ("--state-dir", str(tmp_path / "state"))
    before = json.loads(mplp(repo, "hooks", "status", "--json", *state).stdout)
    by_name = {hook["name"]: hook for hook in before}
    assert by_name["reference-transaction"]["state"] == "absent"
    assert by_name["reference-transaction"]["needed"] is True
    installed = json.loads(mplp(repo, "hooks", "install", "--json", *state).stdout)
    hook = next(h for h in installed if h["name"] == "reference-transaction")
    assert hook["state"] == "installed" and isinstance(hook["format"], int) and hook["kind"]
    assert Path(hook["path"]).is_file()
    after = json.loads(mplp(repo, "hooks", "status", "--json", *state).stdout)
    assert after == installed


def test_an_event_line_says_when_it_was_received_only_when_it_came_late(
    repo: Repo, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    # Happened as it was received: a run with no time of its own is placed at its envelope's.
    # (`emit ci --status running` would say when the command started, and the command's own
    # start-up can take a second on a loaded machine.)
    now = {"ci_provider": "local", "pipeline_id": "build", "run_id": "1", "status": "running"}
    assert emit_json(repo, state, now).returncode == 0
    ended_earlier = {
        "ci_provider": "local",
        "pipeline_id": "nightly",
        "run_id": "7",
        "status": "succeeded",
        "started_at": "2026-03-02T08:50:00.000Z",
        "completed_at": "2026-03-02T08:55:00.000Z",
    }
    done = emit_json(repo, state, ended_earlier)
    assert done.returncode == 0, done.stderr
    lines = mplp(repo, "events", "--state-dir", str(state)).stdout.splitlines()
    assert "nightly #7" in lines[0], lines  # by event time: the nightly run ended first
    # The nightly run's event came late, and says so; the other run's came as it happened.
    # (What the graph derives from an event carries that event's time, and is stored when the
    # graph gets to it: on a loaded machine that may be a second later, and then says so too.)
    ci_lines = [line for line in lines if line.split()[2] == "ci"]  # what the user emitted
    assert [("#7" in line, "(received " in line) for line in ci_lines] == [
        (True, True),
        (False, False),
    ], lines

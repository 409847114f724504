"""Queued envelopes belong to the remote they were queued for, with real processes, two real
collectors on 127.0.0.1 and the real store: a remote configured later (a new process with
``--set remoteUrl=B``, or the settings file changed under a running ``watch``) is not sent
what was queued for another; status says they are held, ``outbox held`` lists them, and the
user moves them (``outbox requeue --held``) or drops them (``outbox drop --held``). Their
own remote, configured again, gets them once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import watch_argv
from tests.gitrepo import Repo
from tests.support.collector import TOKEN, Collector, free_port

pytestmark = pytest.mark.e2e

FAST = ("--set", "forwardRetryInitialMs=5", "--set", "forwardRetryMaxMs=50")


@pytest.fixture
def xdg(tmp_path: Path) -> Path:
    """The user's configuration directory, empty but for what a test writes."""
    (tmp_path / "xdg" / "mplp-lsp").mkdir(parents=True)
    return tmp_path / "xdg"


@pytest.fixture
def collector_b(tmp_path: Path) -> Iterator[Collector]:
    running = Collector(tmp_path / "b.db")
    yield running
    running.stop()


def mplp(
    repo: Repo, xdg: Path, *args: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", *args],
        cwd=repo.path,
        env=_env(xdg),
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _env(xdg: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPLP_LSP_")}
    return {**env, "MPLP_LSP_REMOTE_TOKEN": TOKEN, "XDG_CONFIG_HOME": str(xdg)}


def queue_while_unreachable(repo: Repo, xdg: Path, state: Path, remote: str, runs: int) -> set[str]:
    """``runs`` CI events emitted with ``--remote`` to a port nobody listens on: each is
    stored and stays queued for that remote. Their event ids."""
    for run in range(runs):
        ci = ("--provider", "local", "--pipeline-id", "build", "--run-id", str(run))
        done = mplp(repo, xdg, "emit", "ci", *ci, "--status", "running", "--state-dir",
                    str(state), "--remote", remote, "--wait", "5")  # fmt: skip
        assert (done.returncode, done.stdout) == (0, "accepted\n"), done.stderr
        assert "still queued" in done.stderr
    return {e["event_id"] for e in stored(repo, xdg, state)}


def stored(repo: Repo, xdg: Path, state: Path) -> list[dict[str, Any]]:
    done = mplp(repo, xdg, "events", "--json", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def status(repo: Repo, xdg: Path, state: Path) -> dict[str, Any]:
    done = mplp(repo, xdg, "status", "--json", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    forward: dict[str, Any] = json.loads(done.stdout)["forward"]
    return forward


def outbox(repo: Repo, xdg: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return mplp(repo, xdg, "outbox", *args, "--state-dir", str(state))


def held(repo: Repo, xdg: Path, state: Path) -> list[dict[str, Any]]:
    done = outbox(repo, xdg, state, "held", "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def answered(
    repo: Repo, xdg: Path, state: Path, answer: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``outbox ARGS`` with a terminal as its standard input, on which ``answer`` is typed."""
    leader, follower = os.openpty()
    try:
        os.write(leader, answer.encode())
        return mplp(repo, xdg, "outbox", *args, "--state-dir", str(state), stdin=follower)
    finally:
        os.close(leader)
        os.close(follower)


def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def received(collector: Collector) -> Counter[str]:
    return Counter(str(e["event_id"]) for e in collector.events())


class Watch:
    """A real ``mplp-lsp watch`` on the repository; its log goes to a file."""

    def __init__(self, repo: Repo, xdg: Path, state: Path, *flags: str) -> None:
        self.log = state.parent / f"watch-{time.monotonic_ns()}.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [*watch_argv(repo.path, state, *FAST, *flags)],
                env=_env(xdg),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        until(lambda: "watching" in self.log.read_text(), "watch never started")

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(30)
        return self.log.read_text()


def recorded(repo: Repo, xdg: Path, state: Path, name: str) -> str:
    """Write ``name`` in the repository; the id of the event the daemon records for it."""
    repo.write(name, f"{name} = 1\n")
    found: list[str] = []

    def seen() -> bool:
        found[:] = [
            e["event_id"] for e in stored(repo, xdg, state) if e["payload"].get("file_path") == name
        ]
        return bool(found)

    until(seen, f"{name} was never recorded")
    return found[0]


def test_a_new_process_with_another_remote_holds_the_queue_and_the_user_requeues_it(
    repo: Repo, xdg: Path, tmp_path: Path, collector_b: Collector
) -> None:
    state, remote_a = tmp_path / "state", f"http://127.0.0.1:{free_port()}"
    for_a = queue_while_unreachable(repo, xdg, state, remote_a, 3)
    assert status(repo, xdg, state)["depth"] == len(for_a)
    watch = Watch(repo, xdg, state, "--set", f"remoteUrl={collector_b.url}")
    try:
        new = recorded(repo, xdg, state, "src/new.py")
        until(lambda: new in received(collector_b), "B never got what was queued for it")
        assert not for_a & set(received(collector_b)), "B was sent what was queued for A"
        forward = status(repo, xdg, state)
        (group,) = held(repo, xdg, state)
        assert forward["held"] == {remote_a: len(for_a)}
        assert (group["remote"], group["count"]) == (remote_a, len(for_a))

        done = outbox(repo, xdg, state, "requeue", "--held")  # handed to the running daemon
        assert done.returncode == 0, done.stderr
        to_b = f"to the queue for {collector_b.url}"
        assert done.stdout == f"requeued {len(for_a)} envelopes held for other remotes {to_b}\n"
        until(lambda: for_a <= set(received(collector_b)), "the requeued envelopes never reached B")
        assert status(repo, xdg, state)["held"] == {}
    finally:
        log = watch.stop()
    held_line = (
        f"{len(for_a)} envelopes queued for {remote_a} are held, not sent to {collector_b.url}"
    )
    assert held_line in log
    counts = received(collector_b)
    assert {event_id: counts[event_id] for event_id in for_a} == dict.fromkeys(for_a, 1)
    assert held(repo, xdg, state) == []


def test_switching_back_to_the_first_remote_delivers_its_queue_to_it_once(
    repo: Repo, xdg: Path, tmp_path: Path, collector_b: Collector
) -> None:
    state, port_a = tmp_path / "state", free_port()
    remote_a = f"http://127.0.0.1:{port_a}"
    for_a = queue_while_unreachable(repo, xdg, state, remote_a, 2)
    watch = Watch(repo, xdg, state, "--set", f"remoteUrl={collector_b.url}")
    try:
        for_b = recorded(repo, xdg, state, "src/b.py")
        until(lambda: for_b in received(collector_b), "B never got its own")
        assert not for_a & set(received(collector_b)), "B was sent what was queued for A"
    finally:
        watch.stop()
    # Forwarding off for a run moves nothing: the queue waits for the remote it is for.
    watch = Watch(repo, xdg, state, "--no-remote")
    try:
        recorded(repo, xdg, state, "src/off.py")
        assert status(repo, xdg, state)["held"] == {remote_a: len(for_a)}
    finally:
        watch.stop()
    assert status(repo, xdg, state)["queued_for"] == collector_b.url
    collector_a = Collector(tmp_path / "a.db", port_a)
    try:
        watch = Watch(repo, xdg, state, "--set", f"remoteUrl={remote_a}")
        try:
            until(lambda: for_a <= set(received(collector_a)), "A never got its queue back")
            # What B was to get and has not (src/off.py's event) is held for B now.
            assert status(repo, xdg, state)["held"].get(collector_b.url, 0) >= 1
        finally:
            log = watch.stop()
        counts_a = received(collector_a)
    finally:
        collector_a.stop()
    assert f"{len(for_a)} envelopes held for {remote_a} are queued for it again" in log
    assert {event_id: counts_a[event_id] for event_id in for_a} == dict.fromkeys(for_a, 1)
    assert for_b not in counts_a, "A was sent what B already had"
    assert not for_a & set(received(collector_b))


def test_held_envelopes_are_dropped_only_when_the_user_says_so(
    repo: Repo, xdg: Path, tmp_path: Path, collector_b: Collector
) -> None:
    state, remote_a = tmp_path / "state", f"http://127.0.0.1:{free_port()}"
    for_a = queue_while_unreachable(repo, xdg, state, remote_a, 2)
    ci = ("--provider", "local", "--pipeline-id", "other", "--run-id", "9", "--status", "running")
    done = mplp(
        repo, xdg, "emit", "ci", *ci, "--state-dir", str(state), "--remote", collector_b.url
    )
    assert done.returncode == 0, done.stderr
    assert not for_a & set(received(collector_b)), "B was sent what was queued for A"
    assert status(repo, xdg, state)["held"] == {remote_a: len(for_a)}

    refused = outbox(repo, xdg, state, "drop", "--held")  # no terminal to ask on
    assert refused.returncode == 2
    assert "no terminal to ask on, so nothing was dropped: add --yes" in refused.stderr
    assert status(repo, xdg, state)["held"] == {remote_a: len(for_a)}
    declined = answered(repo, xdg, state, "n\n", "drop", "--held")  # on a terminal: asked
    assert declined.returncode == 2 and "nothing was dropped" in declined.stderr
    assert f"drop {len(for_a)} envelopes held for other remotes?" in declined.stdout
    assert status(repo, xdg, state)["held"] == {remote_a: len(for_a)}
    other = outbox(repo, xdg, state, "drop", "--held", "--from", "http://127.0.0.1:1", "--yes")
    assert (other.returncode, other.stdout) == (
        0,
        "dropped 0 envelopes held for http://127.0.0.1:1\n",
    )

    done = outbox(repo, xdg, state, "drop", "--held", "--from", remote_a + "/", "--yes")
    assert (done.returncode, done.stdout) == (
        0,
        f"dropped {len(for_a)} envelopes held for {remote_a}\n",
    )
    assert status(repo, xdg, state)["held"] == {}
    empty = outbox(repo, xdg, state, "held")
    assert (empty.returncode, empty.stdout) == (0, "")
    assert f"nothing is held: every queued envelope is for {collector_b.url}" in empty.stderr
    assert for_a <= {e["event_id"] for e in stored(repo, xdg, state)}  # the events stay


def test_a_remote_changed_in_the_settings_file_under_a_running_daemon_gets_only_its_own(
    repo: Repo, xdg: Path, tmp_path: Path, collector_b: Collector
) -> None:
    state, port_a = tmp_path / "state", free_port()
    remote_a = f"http://127.0.0.1:{port_a}"
    config = xdg / "mplp-lsp" / "config.toml"
    config.write_text(f'remoteUrl = "{remote_a}"\n')
    watch = Watch(repo, xdg, state)
    try:
        for_a = {recorded(repo, xdg, state, f"src/a{n}.py") for n in range(2)}
        until(lambda: status(repo, xdg, state)["failed_attempts"] > 0, "A was never tried")

        queued_for_a = {e["event_id"] for e in stored(repo, xdg, state)}
        config.write_text(f'remoteUrl = "{collector_b.url}"\n')  # the daemon keeps running
        until(lambda: status(repo, xdg, state).get("remote") == collector_b.url, "not applied")
        for_b = recorded(repo, xdg, state, "src/b.py")
        until(lambda: for_b in received(collector_b), "B never got what was queued for it")
        assert not queued_for_a & set(received(collector_b)), "B was sent what was A's"
        forward = status(repo, xdg, state)
        assert forward["held"].get(remote_a, 0) >= len(queued_for_a), forward
        assert {g["remote"] for g in held(repo, xdg, state)} == {remote_a}

        collector_a = Collector(tmp_path / "a.db", port_a)
        try:
            config.write_text(f'remoteUrl = "{remote_a}"\n')  # and back, still running
            until(lambda: for_a <= set(received(collector_a)), "A never got its queue back")
            counts_a = received(collector_a)
        finally:
            collector_a.stop()
    finally:
        log = watch.stop()
    assert "applies after a restart" not in log
    assert {event_id: counts_a[event_id] for event_id in for_a} == dict.fromkeys(for_a, 1)
    assert for_b not in counts_a

"""Acceptance: a workspace's ``.mplp-lsp.toml`` (``exclude = ["build/"]``, ``debounceMs =
100``) reaches every process, as real processes: ``watch``, ``serve`` (the LSP harness), the
git hooks and ``emit file``; a running daemon applies a change to the file without a
restart, and a hook sees a changed ``gitAuthorEmail`` at once.

How the quiet period is told apart from the default (500 ms): a file rewritten every 250 ms
for 1.25 s is one event under 500 ms (each write restarts the wait; the 2 s maximum is not
reached) and several under 100 ms.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.harness import lsp_session, read_events, server_env, watch_argv
from tests.gitrepo import BASE_ENV
from tests.support.daemon import mplp
from tests.support.waiting import wait_until

ACCEPTANCE = 'exclude = ["build/"]\ndebounceMs = 100\n'
REWRITES, GAP = 6, 0.25


@dataclass
class Daemon:
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.stderr))


@contextmanager
def watching(workspace: Path, state_dir: Path, *args: str) -> Iterator[Daemon]:
    process = subprocess.Popen(
        watch_argv(workspace, state_dir, *args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )
    daemon = Daemon(process)
    assert process.stderr is not None
    reader = threading.Thread(
        target=lambda: daemon.stderr.extend(process.stderr or []), daemon=True
    )
    reader.start()
    try:
        wait_until(lambda: daemon.said("watching "), what=lambda: daemon.stderr)
        yield daemon
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
        reader.join(timeout=10)


def rewrite(path: Path) -> None:
    """The file written REWRITES times, GAP seconds apart (a build tool's repeated output)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for round_ in range(REWRITES):
        path.write_text(f"round {round_}\n")
        time.sleep(GAP)


def paths(state_dir: Path) -> list[str]:
    return [e["payload"]["file_path"] for e in read_events(state_dir, "file_update")]


def test_watch_honours_the_workspace_file(workspace: Path, state_dir: Path) -> None:
    (workspace / ".mplp-lsp.toml").write_text(ACCEPTANCE + 'logLevel = "info"\n')
    with watching(workspace, state_dir) as daemon:
        (workspace / "build").mkdir(exist_ok=True)  # the repository's ignored output
        (workspace / "build" / "out.o").write_text("object\n")
        rewrite(workspace / "src" / "gen.py")
        (workspace / "src" / "last.py").write_text("done\n")
        wait_until(lambda: "src/last.py" in paths(state_dir), what=lambda: paths(state_dir))
        time.sleep(0.5)  # anything late would show now
    recorded = paths(state_dir)
    assert not [p for p in recorded if p.startswith("build/")], recorded
    assert recorded.count("src/gen.py") >= 2, recorded  # 100 ms, not the default 500 ms
    assert daemon.said("HTTP API listening on")  # logLevel = "info" from the file


def test_watch_applies_a_changed_file_live_and_hooks_see_the_author_policy(
    workspace: Path, state_dir: Path
) -> None:
    git = {**BASE_ENV}
    settings = workspace / ".mplp-lsp.toml"
    # gitPollMs = 0: only the hook reports commits, so the hook's own policy is what is stored.
    settings.write_text(ACCEPTANCE + 'logLevel = "info"\ngitPollMs = 0\ngitAuthorEmail = "keep"\n')
    installed = mplp(workspace, "hooks", "install", "--state-dir", str(state_dir))
    assert installed.returncode == 0, installed.stderr
    with watching(workspace, state_dir) as daemon:
        commit(workspace, "one.txt", git)
        wait_until(lambda: len(commits(state_dir)) == 1, what=lambda: commits(state_dir))
        settings.write_text(
            'exclude = ["build/", "gen/"]\ndebounceMs = 100\nlogLevel = "info"\n'
            'gitPollMs = 0\ngitAuthorEmail = "drop"\n'
        )
        wait_until(lambda: daemon.said("settings files changed; applying"), what=daemon.stderr)
        (workspace / "gen").mkdir()
        (workspace / "gen" / "x.txt").write_text("generated\n")
        (workspace / "src" / "y.txt").write_text("mine\n")
        commit(workspace, "two.txt", git)
        wait_until(lambda: "src/y.txt" in paths(state_dir), what=lambda: paths(state_dir))
        wait_until(lambda: len(commits(state_dir)) == 2, what=lambda: commits(state_dir))
    assert not [p for p in paths(state_dir) if p.startswith("gen/")]
    first, second = commits(state_dir)
    assert first.get("author_email") == "ada@example.org"
    assert "author_email" not in second


def test_hooks_resolve_the_file_at_hook_time(workspace: Path, state_dir: Path) -> None:
    settings = workspace / ".mplp-lsp.toml"
    settings.write_text(ACCEPTANCE + 'gitAuthorEmail = "keep"\neventFamily = "upstream"\n')
    installed = mplp(workspace, "hooks", "install", "--state-dir", str(state_dir))
    assert installed.returncode == 0, installed.stderr
    commit(workspace, "one.txt", BASE_ENV)
    wait_until(lambda: len(commits(state_dir)) == 1)
    settings.write_text(ACCEPTANCE + 'gitAuthorEmail = "drop"\n')
    commit(workspace, "two.txt", BASE_ENV)
    wait_until(lambda: len(commits(state_dir)) == 2)
    first, second = commits(state_dir)
    assert first.get("author_email") == "ada@example.org"
    assert "author_email" not in second
    families = [e["event_family"] for e in read_events(state_dir, "git")]
    assert families[0] == "external_integration"  # eventFamily = "upstream", first commit


def test_emit_file_honours_exclude(workspace: Path, state_dir: Path) -> None:
    (workspace / ".mplp-lsp.toml").write_text(ACCEPTANCE)
    state = ("--state-dir", str(state_dir))
    left_out = mplp(
        workspace, "emit", "file", "--path", "build/out.o", "--change", "created", *state
    )
    assert (left_out.returncode, left_out.stdout.strip()) == (0, "ignored"), left_out.stderr
    kept = mplp(workspace, "emit", "file", "--path", "src/a.py", "--change", "created", *state)
    assert (kept.returncode, kept.stdout.strip()) == (0, "accepted"), kept.stderr
    assert paths(state_dir) == ["src/a.py"]


async def test_serve_honours_the_workspace_file(workspace: Path, state_dir: Path) -> None:
    import asyncio

    (workspace / ".mplp-lsp.toml").write_text(ACCEPTANCE)
    async with lsp_session(workspace, state_dir, fast=False) as session:
        session.save("build/out.o", "object\n")
        for round_ in range(REWRITES):
            session.save("src/gen.py", f"round {round_}\n")
            await asyncio.sleep(GAP)
        session.save("src/last.py", "done\n")
        deadline = time.monotonic() + 60
        while "src/last.py" not in paths(state_dir) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    recorded = paths(state_dir)
    assert not [p for p in recorded if p.startswith("build/")], recorded
    assert recorded.count("src/gen.py") >= 2, recorded
    with_origin = mplp(workspace, "config", "--json", "--state-dir", str(state_dir))
    report = json.loads(with_origin.stdout)["settings"]
    assert report["debounceMs"]["origin"] == f"workspace file {workspace / '.mplp-lsp.toml'}"


def test_a_plain_http_remote_is_refused_naming_what_to_set(
    workspace: Path, state_dir: Path
) -> None:
    with watching(workspace, state_dir, "--remote", "http://192.0.2.1:9", "--no-api") as daemon:
        wait_until(lambda: daemon.said("forwarding is off"), what=daemon.stderr)
    message = next(line for line in daemon.stderr if "forwarding is off" in line)
    for way in ("MPLP_LSP_REMOTE_ALLOW_INSECURE_HTTP=true", "--set remoteAllowInsecureHttp=true"):
        assert way in message


def commit(workspace: Path, name: str, env: dict[str, str]) -> None:
    (workspace / name).write_text(name)
    full = {**server_env(), **env}
    for args in (["add", name], ["commit", "-qm", name]):
        subprocess.run(["git", "-C", str(workspace), *args], env=full, check=True)


def commits(state_dir: Path) -> list[dict[str, Any]]:
    return [
        e["payload"]
        for e in read_events(state_dir, "git")
        if e["payload"]["event_kind"] == "commit"
    ]


async def test_serve_applies_a_changed_settings_file_live(workspace: Path, state_dir: Path) -> None:
    import asyncio

    async with lsp_session(workspace, state_dir) as session:
        session.save("src/before.py", "x\n")
        [before] = await session.wait_for_events(1, settle=0)
        (workspace / ".mplp-lsp.toml").write_text('eventFamily = "upstream"\n')
        deadline = time.monotonic() + 60
        probe = 0
        while time.monotonic() < deadline:
            probe += 1
            session.save(f"src/probe{probe}.py", "x\n")
            await asyncio.sleep(0.3)
            families = {e["event_family"] for e in session.events("file_update")}
            if "external_integration" in families:
                break
    assert before["event_family"] == "ExternalIntegrationEvent"
    assert "external_integration" in families, families


async def test_a_cli_process_resolves_what_the_editor_sent_to_serve(
    workspace: Path, state_dir: Path
) -> None:
    (workspace / ".mplp-lsp.toml").write_text('gitAuthorEmail = "keep"\n')
    editor = {"gitAuthorEmail": "drop", "remoteUrl": "https://collector.example"}
    async with lsp_session(workspace, state_dir, settings=editor):
        pass
    done = mplp(workspace, "config", "--json", "--state-dir", str(state_dir))
    report = json.loads(done.stdout)["settings"]
    assert report["gitAuthorEmail"] == {
        "value": "drop",
        "origin": "editor (as the store's owner last received it)",
    }
    assert report["remoteUrl"]["value"] is None  # what sends data is never taken from there

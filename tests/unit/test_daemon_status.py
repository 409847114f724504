"""``mplp-lsp status`` asking a running daemon: only over loopback, never trusting the answer."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from mplp_lsp.api.endpoint import Endpoint
from mplp_lsp.cli.daemon_status import daemon_status, without_live_state
from mplp_lsp.engine.private import write_private
from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.engine.status import WorkspaceStatus

TOKEN = "daemon-token"
FORWARD = {"enabled": True, "state": "queuing", "remote": None, "depth": 3}


class Daemon:
    """A loopback server standing in for the daemon's API; it answers what it is told."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.answer: tuple[int, str] = (200, "{}")

    async def status(self, request: web.Request) -> web.Response:
        self.requests.append(request.headers.get("Authorization", ""))
        status, body = self.answer
        return web.Response(status=status, text=body, content_type="application/json")


@pytest.fixture
async def daemon() -> AsyncIterator[tuple[Daemon, int]]:
    fake = Daemon()
    app = web.Application()
    app.router.add_get("/status", fake.status)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield fake, port
    await runner.cleanup()


def endpoint(tmp_path: Path, url: str) -> tuple[StatePaths, Endpoint]:
    """A state dir whose own token file (0600) holds the token, and the daemon's URL."""
    write_private(tmp_path / "api-token", (TOKEN + "\n").encode())
    return StatePaths(tmp_path), Endpoint(url)


async def ask(api: tuple[StatePaths, Endpoint]) -> WorkspaceStatus | None:
    return await asyncio.to_thread(daemon_status, *api)


async def test_the_daemons_report_is_read_and_unknown_fields_are_left_out(
    daemon: tuple[Daemon, int], tmp_path: Path
) -> None:
    fake, port = daemon
    report = {"state_dir": "s", "events_total": 7, "forward": FORWARD, "added_later": 1}
    fake.answer = (200, json.dumps(report))
    status = await ask(endpoint(tmp_path, f"http://127.0.0.1:{port}"))
    assert status == WorkspaceStatus(state_dir="s", events_total=7, forward=FORWARD)
    assert fake.requests == [f"Bearer {TOKEN}"]


@pytest.mark.parametrize("form", ["https://127.0.0.1:{port}", "http://someone@127.0.0.1:{port}"])
async def test_the_token_goes_only_to_a_plain_loopback_address(
    daemon: tuple[Daemon, int], tmp_path: Path, form: str
) -> None:
    fake, port = daemon
    fake.answer = (200, json.dumps({"state_dir": "s"}))
    assert await ask(endpoint(tmp_path, form.format(port=port))) is None
    assert fake.requests == []


async def test_a_token_file_others_can_read_is_not_sent(
    daemon: tuple[Daemon, int], tmp_path: Path
) -> None:
    fake, port = daemon
    fake.answer = (200, json.dumps({"state_dir": "s"}))
    api = endpoint(tmp_path, f"http://127.0.0.1:{port}")
    (tmp_path / "api-token").chmod(0o644)
    assert await ask(api) is None
    (tmp_path / "api-token").unlink()
    (tmp_path / "api-token").symlink_to(tmp_path / "elsewhere")  # never followed
    (tmp_path / "elsewhere").write_text(TOKEN)
    (tmp_path / "elsewhere").chmod(0o600)
    assert await ask(api) is None
    assert fake.requests == []


@pytest.mark.parametrize(
    "answer",
    [(401, "{}"), (200, "not json"), (200, "[1, 2]"), (200, '{"events_total": 1}')],
    ids=["refused", "not-json", "not-an-object", "missing-fields"],
)
async def test_an_answer_that_is_not_a_status_is_no_status(
    daemon: tuple[Daemon, int], tmp_path: Path, answer: tuple[int, str]
) -> None:
    fake, port = daemon
    fake.answer = answer
    assert await ask(endpoint(tmp_path, f"http://127.0.0.1:{port}")) is None
    assert len(fake.requests) == 1


async def test_no_daemon_listening_is_no_status(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert await ask(endpoint(tmp_path, f"http://127.0.0.1:{port}")) is None


def test_the_stores_view_of_a_running_forwarder_is_unknown_not_queuing() -> None:
    status = WorkspaceStatus(state_dir="s", forward=dict(FORWARD))
    assert without_live_state(status).forward == {**FORWARD, "state": "unknown"}
    assert status.forward == FORWARD  # the store's own view is left as it was
    off = WorkspaceStatus(state_dir="s", forward={**FORWARD, "enabled": False, "state": "off"})
    assert without_live_state(off) == off
    assert without_live_state(WorkspaceStatus(state_dir="s")).forward is None

"""Live settings: typed per-section subscriptions, the settings that need a restart (and
docs/settings.md naming exactly those), and the settings files watched by polling."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from mplp_lsp.config.live import (
    ConfigFileWatch,
    Debounce,
    Ignore,
    LiveSettings,
    restart_settings,
)
from mplp_lsp.config.settings import Settings
from tests.conftest import REPO


def test_a_subscriber_gets_its_section_only_when_it_changed() -> None:
    live = LiveSettings(Settings())
    seen: list[tuple[Debounce, Debounce]] = []
    live.subscribe(Debounce, lambda new, old: seen.append((new, old)))
    live.update(Settings(exclude=("build/",)))
    assert seen == []
    live.update(Settings(exclude=("build/",), debounce_ms=100))
    assert seen == [
        (Debounce(debounce_ms=100, max_wait_ms=2000), Debounce(debounce_ms=500, max_wait_ms=2000))
    ]
    assert live.current.debounce_ms == 100


def test_one_failing_subscriber_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    live = LiveSettings(Settings())
    applied: list[Ignore] = []

    def broken(_new: Ignore, _old: Ignore) -> None:
        raise RuntimeError("boom")

    live.subscribe(Ignore, broken)
    live.subscribe(Ignore, lambda new, _old: applied.append(new))
    live.update(Settings(exclude=("x/",)))
    assert applied == [Ignore(exclude=("x/",))]
    assert "applying Ignore settings failed" in caplog.text


def test_update_names_the_changed_settings_that_need_a_restart() -> None:
    live = LiveSettings(Settings())
    changed = live.update(Settings(api_port=8080, debounce_ms=1, remote_url="https://r.example"))
    assert changed == ["apiPort"]  # the remote applies live: forwarding starts again


def test_docs_name_exactly_the_settings_that_need_a_restart() -> None:
    text = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- restart-settings -->(.*?)<!-- /restart-settings -->", text, re.S)
    assert block is not None
    assert re.findall(r"`(\w+)`", block[1]) == restart_settings()


async def test_the_watch_sees_a_file_appear_change_and_go(tmp_path: Path) -> None:
    path = tmp_path / ".mplp-lsp.toml"
    changes: asyncio.Queue[None] = asyncio.Queue()

    async def changed() -> None:
        changes.put_nowait(None)

    watch = ConfigFileWatch([path], changed, interval=0.01)
    watch.start()
    try:
        for step in (
            lambda: path.write_text("debounceMs = 1\n"),
            lambda: path.write_text("debounceMs = 22\n"),
            path.unlink,
        ):
            step()
            await asyncio.wait_for(changes.get(), timeout=30)
    finally:
        await watch.close()

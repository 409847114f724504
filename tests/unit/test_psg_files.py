"""PSG file nodes follow committed file_update events, with one graph_update per change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.engine.bus import EventBus
from mplp_lsp.engine.intake import Intake, Submission
from mplp_lsp.graph.files import FileNodes, content_hash
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from mplp_lsp.store.errorlog import IntegrationErrorLog
from mplp_lsp.store.events import EventLog
from mplp_lsp.store.writer import StoreWriter


class Rig:
    def __init__(self, root: Path, writer: StoreWriter, bus: EventBus, intake: Intake) -> None:
        self.root, self.writer, self.bus, self.intake = root, writer, bus, intake

    async def change(
        self, path: str, change_type: str, timestamp: str, previous: str | None = None
    ) -> None:
        payload: dict[str, Any] = {
            "file_path": path,
            "change_type": change_type,
            "timestamp": timestamp,
        }
        if previous:
            payload["previous_path"] = previous
        await self.intake.submit(Submission(Kind.FILE_UPDATE, payload, "ide", trusted_paths=True))
        await self.bus.drain()
        await self.bus.drain()  # the graph_update events the PSG submitted in turn

    async def nodes(self) -> dict[str, tuple[Any, ...]]:
        rows = await self.writer.read(
            lambda c: c.execute(
                "SELECT path, last_modified, size, content_hash FROM psg_files"
            ).fetchall()
        )
        return {row[0]: tuple(row[1:]) for row in rows}

    async def graph_updates(self) -> list[dict[str, Any]]:
        events = await self.writer.read(lambda c: EventLog(c).query(kinds=["graph_update"]))
        return [e.envelope for e in events]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    writer = StoreWriter(tmp_path / "events.db")
    await writer.start()
    bus = EventBus()
    intake = Intake(writer, bus, IntegrationErrorLog(tmp_path / "e.jsonl"), root=root)
    executor = ThreadPoolExecutor(1)
    nodes = FileNodes(root, writer, intake, executor)
    bus.subscribe("psg", nodes.handle, kinds={"file_update"})
    yield Rig(root, writer, bus, intake)
    await bus.close()
    await writer.close()
    executor.shutdown()


async def test_created_modified_renamed_deleted(rig: Rig) -> None:
    (rig.root / "a.txt").write_text("one")
    await rig.change("a.txt", "created", "2026-01-01T00:00:01.000Z")
    nodes = await rig.nodes()
    assert nodes["a.txt"] == ("2026-01-01T00:00:01.000Z", 3, content_hash(rig.root / "a.txt"))

    (rig.root / "a.txt").write_text("two!")
    await rig.change("a.txt", "modified", "2026-01-01T00:00:02.000Z")
    assert (await rig.nodes())["a.txt"][1] == 4

    (rig.root / "a.txt").rename(rig.root / "b.txt")
    await rig.change("b.txt", "renamed", "2026-01-01T00:00:03.000Z", previous="a.txt")
    assert set(await rig.nodes()) == {"b.txt"}

    (rig.root / "b.txt").unlink()
    await rig.change("b.txt", "deleted", "2026-01-01T00:00:04.000Z")
    assert await rig.nodes() == {}

    updates = await rig.graph_updates()
    assert [(u["update_kind"], u["node_delta"], u["payload"]["node_id"]) for u in updates] == [
        ("node_add", 1, "a.txt"),
        ("node_update", 0, "a.txt"),
        ("bulk", 0, "b.txt"),
        ("node_delete", -1, "b.txt"),
    ]
    assert updates[2]["payload"]["previous_node_id"] == "a.txt"
    assert len({u["graph_id"] for u in updates}) == 1
    assert all(validate(Kind.GRAPH_UPDATE, u).ok for u in updates)


async def test_a_late_event_never_moves_a_node_backwards(rig: Rig) -> None:
    (rig.root / "c.txt").write_text("new")
    await rig.change("c.txt", "modified", "2026-01-01T00:00:10.000Z")
    await rig.change("c.txt", "deleted", "2026-01-01T00:00:05.000Z")  # older: arrives late
    assert (await rig.nodes())["c.txt"][0] == "2026-01-01T00:00:10.000Z"
    assert [u["update_kind"] for u in await rig.graph_updates()] == ["node_add"]


async def test_deleting_an_unknown_file_changes_nothing(rig: Rig) -> None:
    await rig.change("never.txt", "deleted", "2026-01-01T00:00:01.000Z")
    assert await rig.nodes() == {}
    assert await rig.graph_updates() == []


async def test_a_file_gone_before_hashing_is_recorded_without_facts(rig: Rig) -> None:
    await rig.change("vanished.txt", "created", "2026-01-01T00:00:01.000Z")
    assert (await rig.nodes())["vanished.txt"] == ("2026-01-01T00:00:01.000Z", None, None)


async def test_a_big_transaction_is_one_bulk_graph_update(rig: Rig) -> None:
    from mplp_lsp.graph.graph_events import BULK_THRESHOLD

    count = BULK_THRESHOLD + 10
    submissions = []
    for i in range(count):
        (rig.root / f"n{i}.txt").write_text(str(i))
        payload = {
            "file_path": f"n{i}.txt",
            "change_type": "created",
            "timestamp": "2026-01-01T00:00:01.000Z",
        }
        submissions.append(Submission(Kind.FILE_UPDATE, payload, "ide", trusted_paths=True))
    await rig.intake.submit_many(submissions)
    await rig.bus.drain()
    await rig.bus.drain()
    [bulk] = await rig.graph_updates()
    assert (bulk["update_kind"], bulk["node_delta"], bulk["edge_delta"]) == ("bulk", count, 0)
    assert bulk["payload"]["changes"] == {"node_add": count}
    assert bulk["payload"]["node_ids_complete"] is True
    assert len(await rig.nodes()) == count
    assert validate(Kind.GRAPH_UPDATE, bulk).ok

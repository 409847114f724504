"""Save -> stored, shared by the editor save benchmarks and bench_lsp.py.

A save's latency is the wall-clock time from the editor's write to the moment its
``file_update`` row is visible in the store (a reader polling the database every 1 ms, as
``mplp-lsp events`` would see it). The peer, measured in the same run, is the same number of
``didSave`` notifications sent by a bare JSON-RPC client (no editor), with the same debounce:
the difference between the two is what the editor adds.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

from .harness import Bench, percentile
from .jsonrpc_client import mplp_cmd, save, started, wait_ready

POLL_S = 0.001


def _file_updates(database: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            return int(
                conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'file_update'").fetchone()[0]
            )
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


class StoreWatcher:
    """Records the wall-clock time at which each new ``file_update`` becomes visible."""

    def __init__(self, database: Path) -> None:
        self._database = database
        self.stored_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StoreWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        seen = _file_updates(self._database)
        while not self._stop.is_set():
            now = _file_updates(self._database)
            if now > seen:
                stamp = time.time()
                self.stored_at.extend([stamp] * (now - seen))
                seen = now
            time.sleep(POLL_S)


async def bare_client_saves(tmp: Path, saves: int, debounce_ms: int) -> list[float]:
    """didSave from a bare JSON-RPC client -> stored, in ms."""
    workspace = tmp / "peer"
    (workspace / "src").mkdir(parents=True)
    state = tmp / "peer-state"
    client, _ = await started(mplp_cmd(state), workspace, {"mplp": {"debounceMs": debounce_ms}})
    await wait_ready(client)
    latencies = []
    path = workspace / "src" / "saved.py"
    for index in range(saves):
        path.write_text(f"x = {index}\n")
        before = _file_updates(state / "events.db")
        begin = time.perf_counter()
        save(client, path.as_uri())
        while _file_updates(state / "events.db") == before:
            await asyncio.sleep(POLL_S)
        latencies.append((time.perf_counter() - begin) * 1000)
    await client.stop()
    return latencies


def report_editor_saves(
    bench: Bench, editor: str, latencies: list[float], peer: list[float], debounce_ms: int
) -> float:
    """An editor's save -> stored p50 (judged: the debounce plus 50 ms) and p99, each beside
    the bare client's; returns what the editor adds to the p50."""
    p50, peer_p50 = percentile(latencies, 0.5), percentile(peer, 0.5)
    bench.figure(
        f"{editor}, p50",
        p50,
        "ms",
        target=f"<= {debounce_ms + 50} ms",
        met=p50 <= debounce_ms + 50,
        peer=("bare didSave client, p50", peer_p50),
    )
    bench.figure(
        f"{editor}, p99",
        percentile(latencies, 0.99),
        "ms",
        peer=("bare didSave client, p99", percentile(peer, 0.99)),
    )
    return p50 - peer_p50

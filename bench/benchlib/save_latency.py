"""Save -> stored, shared by the editor save benchmarks and bench_lsp.py.

A save's latency is the wall-clock time from the editor's write to the moment its
``file_update`` row is visible in the store (as ``mplp-lsp events`` would see it: a reader
thread polling the database every 0.2 ms over one read-only connection, so the figure carries
at most that much of the reader's own delay; an asyncio poll would add the event loop's
millisecond timer granularity to every sample). The peer, measured in the same run, is the same number of
``didSave`` notifications sent by a bare JSON-RPC client (no editor), with the same debounce:
the difference between the two is what the editor adds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from .harness import Bench, percentile
from .jsonrpc_client import mplp_cmd, save, started, wait_ready
from .stored import StoredCount

POLL_S = 0.0002


class StoreWatcher:
    """Records the wall-clock time at which each new ``file_update`` becomes visible."""

    def __init__(self, database: Path) -> None:
        self.stored_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stored = StoredCount(database)

    def __enter__(self) -> StoreWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    async def next_stored(self, seen: int) -> float:
        """The wall-clock time at which the store held more than ``seen`` file updates."""
        while len(self.stored_at) <= seen:
            await asyncio.sleep(POLL_S)
        return self.stored_at[seen]

    def _run(self) -> None:
        try:
            seen = self._stored.count()
            while not self._stop.is_set():
                now = self._stored.count()
                if now > seen:
                    stamp = time.time()
                    self.stored_at.extend([stamp] * (now - seen))
                    seen = now
                time.sleep(POLL_S)
        finally:
            self._stored.close()


async def bare_client_saves(tmp: Path, saves: int, debounce_ms: int) -> list[float]:
    """didSave from a bare JSON-RPC client -> stored, in ms."""
    workspace = tmp / "peer"
    (workspace / "src").mkdir(parents=True)
    state = tmp / "peer-state"
    client, _ = await started(mplp_cmd(state), workspace, {"mplp": {"debounceMs": debounce_ms}})
    await wait_ready(client)
    latencies = []
    path = workspace / "src" / "saved.py"
    with StoreWatcher(state / "events.db") as watcher:
        for index in range(saves):
            path.write_text(f"x = {index}\n")
            seen = len(watcher.stored_at)
            begin = time.time()
            save(client, path.as_uri())
            latencies.append((await watcher.next_stored(seen) - begin) * 1000)
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

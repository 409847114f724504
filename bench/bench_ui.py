"""Time to first render of the dashboard's timeline, and the bytes that page transfers.

Run from the repository root: python bench/bench_ui.py [--quick] [--events N] [--peer-events N]
[--loads K]

Two stores are filled in the store's own format (bulk INSERT into ``events`` of a store
created by ``connect``, as bench_store.py does): N events (default 1,000,000) and a peer of
1,000, each spread over 90 days across every lane. For each, a real ``mplp-lsp watch``
serves it, a real ``mplp-lsp ui`` prints the private login page it wrote, and Debian's
Chromium (Playwright) opens it (the page, the login page and its post, then the dashboard).
Measured in the dashboard's page: from the start of its navigation to the moment the
timeline has drawn its buckets; the first load (a cold SQLite cache) and the median of K
reloads. Bytes: everything the page transferred
(HTML, scripts, styles, every API answer), as Chromium's network layer counts them. Also
the answer time of two zoomed views (a day: 10-minute buckets counted from the index; a
week: hourly counts), fetched from the page.

The hourly counts the timeline reads (``timeline_hours``) are kept up to date by the daemon
as events arrive (a bus subscriber folds every 5,000 events or minute); a bulk-filled store
has not had that, so the fill ends with the same fold (mplp_lsp.ui.timeline.fold), timed
and printed on its own: what a store pays once if its counts were never kept (an upgrade
pays it in the migration).

Targets: first render <= 1 s with N events, and <= 500 KB transferred. Without Debian's
chromium it says so and exits 77.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchlib.harness import Bench
from mplp_lsp.store.database import connect, transaction
from mplp_lsp.ui.timeline import fold

RENDER_TARGET_S = 1.0
BYTES_TARGET = 500 * 1024
SPAN = timedelta(days=90)
KINDS = ("file_update", "git", "tool", "ci", "pipeline_stage", "graph_update", "runtime_execution")
INSERT = (
    "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body, minted)"
    " VALUES (?, ?, ?, ?, ?, ?, 1)"
)


def fill(state_dir: Path, count: int) -> None:
    """A store of ``count`` events, written the way the event log writes them."""
    state_dir.mkdir(parents=True)
    conn = connect(state_dir / "events.db")
    start = datetime(2026, 5, 1, tzinfo=UTC)
    step = SPAN / count
    conn.execute("PRAGMA synchronous = OFF")  # filling only; the daemon reopens it as usual
    conn.execute("BEGIN")
    batch: list[tuple[Any, ...]] = []
    for i in range(count):
        at = (start + step * i).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        kind = KINDS[i % len(KINDS)]
        event_id = str(uuid.UUID(int=i + 1, version=4))
        envelope = {
            "event_id": event_id,
            "event_family": "ExternalIntegrationEvent",
            "event_type": "file_update",
            "timestamp": at,
            "source_module": "ide",
            "source": "mplp-lsp/bench",
            "payload": {
                "file_path": f"src/pkg/module_{i % 500}.py",
                "change_type": "modified",
                "timestamp": at,
            },
        }
        body = json.dumps(envelope, separators=(",", ":"))
        batch.append((event_id, kind, i.to_bytes(8, "big"), at, at, body))
        if len(batch) == 50_000:
            conn.executemany(INSERT, batch)
            batch.clear()
    conn.executemany(INSERT, batch)
    # The graph consumers start where the log ends: these events are history, not news.
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) SELECT 'consumers.floor',"
        " CAST(max(seq) AS TEXT) FROM events"
    )
    conn.execute("COMMIT")
    began = time.perf_counter()
    with transaction(conn):
        fold(conn)
    print(
        f"  counted {count:,} events into the hourly timeline in {time.perf_counter() - began:.2f} s (once)"
    )
    conn.close()


class Daemon:
    def __init__(self, root: Path, state_dir: Path) -> None:
        self.workspace = root / "workspace"
        self.workspace.mkdir()
        self.state_dir = state_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MPLP_LSP_")}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mplp_lsp",
                "watch",
                "--state-dir",
                str(state_dir),
                str(self.workspace),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "HTTP API on" in line:
                break
        else:
            raise RuntimeError("the daemon did not start")

    def login_page(self) -> str:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mplp_lsp",
                "ui",
                "--state-dir",
                str(self.state_dir),
                "--workspace",
                str(self.workspace),
            ],
            capture_output=True,
            text=True,
            env=self.env,
            check=True,
        )
        return done.stdout.strip()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)


def measure(browser: Any, daemon: Daemon, loads: int) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})  # every load transfers all
    transferred: list[float] = []
    cdp.on("Network.loadingFinished", lambda e: transferred.append(e["encodedDataLength"]))

    def rendered_ms() -> float:
        page.wait_for_selector("body[data-timeline-rendered]", timeout=60_000)
        return float(
            page.evaluate("performance.getEntriesByName('timeline-rendered')[0].startTime")
        )

    page.goto(daemon.login_page())
    first = rendered_ms()
    page.wait_for_timeout(1500)  # the other panels finish loading
    first_bytes = sum(transferred)
    again = []
    for _ in range(loads):
        page.reload()
        again.append(rendered_ms())
    # Zoomed views, as the page asks for them: a day (10-minute buckets, counted from the
    # index) and a week (hourly counts) in the middle of the stored range.
    zoom = {}
    for name, days in (("day_ms", 1), ("week_ms", 7)):
        zoom[name] = statistics.median(
            page.evaluate(
                """async (days) => {
                  const mid = Date.parse("2026-06-15T00:00:00Z");
                  const q = new URLSearchParams({from: new Date(mid).toISOString(),
                    to: new Date(mid + days * 86400000).toISOString()});
                  const t0 = performance.now();
                  await (await fetch(`/ui/api/timeline?${q}`)).json();
                  return performance.now() - t0;
                }""",
                days,
            )
            for _ in range(loads)
        )
    context.close()
    return {"first_ms": first, "median_ms": statistics.median(again), "bytes": first_bytes, **zoom}


def main() -> None:
    bench = Bench(__doc__)
    bench.size("--events", full=1_000_000, quick=2_000, help="events in the measured store")
    bench.size("--peer-events", full=1_000, quick=100, help="events in the peer's store")
    bench.size("--loads", full=5, quick=1, help="reloads (the median is shown)")
    with bench.run() as args:
        chromium = shutil.which("chromium")
        if chromium is None:
            bench.unavailable("Debian's chromium is needed (apt-get install chromium)")
        render(bench, args, chromium)


def render(bench: Bench, args: argparse.Namespace, chromium: str) -> None:
    from playwright.sync_api import sync_playwright

    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mplp-bench-ui-") as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for count in (args.peer_events, args.events):
            root = Path(tmp) / str(count)
            began = time.perf_counter()
            fill(root / "state", count)
            print(
                f"filled a store with {count:,} events in {time.perf_counter() - began:.1f} s",
                flush=True,
            )
            daemon = Daemon(root, root / "state")
            try:
                results[count] = measure(browser, daemon, args.loads)
            finally:
                daemon.stop()
        browser.close()
    print()
    print(
        f"{'stored events':>15}  {'first render':>13}  {'median of ' + str(args.loads):>13}  {'transferred':>12}"
        f"  {'1-day view':>11}  {'1-week view':>11}"
    )
    for count, r in results.items():
        print(
            f"{count:>15,}  {r['first_ms']:>10.0f} ms  {r['median_ms']:>10.0f} ms  {r['bytes'] / 1024:>9.1f} KB"
            f"  {r['day_ms']:>8.0f} ms  {r['week_ms']:>8.0f} ms"
        )
    big = results[args.events]
    print()
    print(
        f"target: first render <= {RENDER_TARGET_S * 1000:.0f} ms with {args.events:,} events: "
        f"{bench.verdict(big['first_ms'] <= RENDER_TARGET_S * 1000)} ({big['first_ms']:.0f} ms)"
    )
    print(
        f"target: <= {BYTES_TARGET // 1024} KB transferred: "
        f"{bench.verdict(big['bytes'] <= BYTES_TARGET)} ({big['bytes'] / 1024:.1f} KB)"
    )


if __name__ == "__main__":
    main()

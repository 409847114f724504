"""Resource soak of a real daemon: an idle phase, then a steady event load.

Starts ``mplp-lsp serve`` over stdio for a temporary git workspace (API on, git polling on,
as an editor would run it), lets it sit idle, then saves files at a steady rate (each save
one file_update plus its graph_update). Samples the process every few seconds from /proc:
CPU time, RSS, open file descriptors, and the store's size on disk.

Prints: idle CPU % (target < 1 %), load CPU % (target < 5 % of one core), RSS growth over
each phase (target < 5 %), the fd delta (target 0: no leak), store growth per event, and,
as the peer measured in the same run, the idle CPU and RSS of the smallest pygls server
(bench/benchlib/minimal_server.py) over the same idle time.

    python bench/soak.py                                       # the full soak: 1 h idle + 1 h load
    python bench/soak.py --idle-seconds 180 --load-seconds 180   # a short run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchlib.harness import Bench
from benchlib.jsonrpc_client import RawClient, minimal_cmd

SERVE = [sys.executable, "-m", "mplp_lsp", "serve", "--log-level", "warning"]
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    at: float
    cpu: float  # seconds of user + system time, children included
    rss_kib: int
    fds: int
    store_bytes: int


def sample(pid: int, state: Path | None) -> Sample:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = sum(int(value) for value in fields[11:15]) / TICKS  # utime stime cutime cstime
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    store = sum(p.stat().st_size for p in state.glob("events.db*")) if state else 0
    return Sample(time.monotonic(), cpu, rss, fds, store)


async def watch(pid: int, state: Path | None, seconds: float, every: float) -> list[Sample]:
    samples = [sample(pid, state)]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(min(every, max(0.0, end - time.monotonic())))
        samples.append(sample(pid, state))
    return samples


async def load(client: RawClient, workspace: Path, seconds: float, rate: float) -> int:
    sent = 0
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        path = workspace / "src" / f"f{sent % 500}.py"
        path.write_text(f"value = {sent}\n")
        client.notify("textDocument/didSave", {"textDocument": {"uri": path.as_uri()}})
        sent += 1
        await asyncio.sleep(max(0.0, sent / rate - elapsed))
    return sent


def cpu_percent(samples: list[Sample]) -> float:
    return 100 * (samples[-1].cpu - samples[0].cpu) / (samples[-1].at - samples[0].at)


def growth(samples: list[Sample]) -> float:
    # The first quarter's median is the base: start-up allocations are not growth.
    base = sorted(s.rss_kib for s in samples[: max(1, len(samples) // 4)])
    first = base[len(base) // 2]
    return 100 * (samples[-1].rss_kib - first) / first


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="mplp-soak-") as scratch:
        workspace = Path(scratch, "ws")
        (workspace / "src").mkdir(parents=True)
        git = await asyncio.create_subprocess_exec("git", "init", "-q", str(workspace))
        assert await git.wait() == 0
        state = Path(scratch, "state")
        peer = RawClient()
        await peer.start(*minimal_cmd())
        await peer.initialize(workspace.as_uri())

        client = RawClient()
        await client.start(*SERVE, "--state-dir", str(state))
        await client.initialize(
            workspace.as_uri(), {"mplp": {"debounceMs": 300, "gitPollMs": 1000}}
        )
        while not (await client.request("mplp/status"))["ready"]:
            await asyncio.sleep(0.05)
        assert client.process is not None and peer.process is not None
        pid = client.process.pid
        await asyncio.sleep(args.warmup)

        idle, peer_idle = await asyncio.gather(
            watch(pid, state, args.idle_seconds, args.every),
            watch(peer.process.pid, None, args.idle_seconds, args.every),
        )
        loaded, sent = await asyncio.gather(
            watch(pid, state, args.load_seconds, args.every),
            load(client, workspace, args.load_seconds, args.rate),
        )
        await asyncio.sleep(2)  # the last debounce window settles
        status = await client.request("mplp/status")
        stored = sum(status["workspaces"][0]["events_by_kind"].values())
        after = sample(pid, state)
        await client.stop()
        await peer.stop()

    store_growth = loaded[-1].store_bytes - loaded[0].store_bytes
    print(
        f"idle {args.idle_seconds:.0f} s, load {args.load_seconds:.0f} s at {args.rate:g} saves/s"
    )
    print(
        f"idle CPU:        {cpu_percent(idle):6.3f} %   target < 1 %   "
        f"(peer minimal pygls server: {cpu_percent(peer_idle):.3f} %)"
    )
    print(
        f"idle RSS growth: {growth(idle):6.2f} %   target < 5 %   "
        f"({idle[0].rss_kib / 1024:.1f} -> {idle[-1].rss_kib / 1024:.1f} MiB; "
        f"peer {peer_idle[-1].rss_kib / 1024:.1f} MiB)"
    )
    print(f"load CPU:        {cpu_percent(loaded):6.3f} %   target < 5 % of one core")
    print(
        f"load RSS growth: {growth(loaded):6.2f} %   target < 5 %   "
        f"({loaded[0].rss_kib / 1024:.1f} -> {loaded[-1].rss_kib / 1024:.1f} MiB)"
    )
    print(
        f"fd delta:        {after.fds - idle[0].fds:+d}        target 0   "
        f"({idle[0].fds} -> {after.fds}; max {max(s.fds for s in idle + loaded)})"
    )
    print(
        f"saves sent:      {sent}; events stored: {stored}; store growth "
        f"{store_growth / 2**20:.2f} MiB ({store_growth / max(1, sent):.0f} B per save)"
    )


if __name__ == "__main__":
    bench = Bench(__doc__)
    bench.size("--idle-seconds", full=3600.0, quick=2.0, help="seconds idle")
    bench.size("--load-seconds", full=3600.0, quick=2.0, help="seconds under load")
    bench.size("--every", full=5.0, quick=0.5, help="seconds between samples")
    bench.size("--warmup", full=10.0, quick=0.5, help="seconds before measuring")
    bench.parser.add_argument(
        "--rate", type=float, default=10.0, help="saves per second under load"
    )
    with bench.run() as args:
        asyncio.run(main(args))

"""How big the local store gets over a year and more of ordinary work, with the default
retention, beside the same work with retention off (the previous release's behaviour).

Run from the repository root: python bench/bench_store_growth.py [--days N] [--files N]

Each working day (five in seven) of the simulation, through a real Workspace (its intake,
its project graph with file snapshots, its compaction) on a real store:

* about 150 saves of the workspace's files (a few hundred Python modules, each save a real
  write of new content observed as the editor reports it),
* 6 commits (git_event), 20 tool runs (started and ended), 2 CI runs (running, ended),

and the store owner's compaction pass at the end of the day. The days are simulated: events
are stored with the day's time as their arrival (the store's clock is the simulation's),
and a pass counts ages from the day. At the end, a file saved in the last week is changed
behind the daemon's back: the drift is found, and both the three-way merge and "PSG wins"
restore from its snapshot.

Figures: the store's size on disk after a year and at the end, the events kept (and the
oldest kept's age), the snapshots; target after a year of work: <= 300 MB ("a few hundred
MB"), and every event of the last retentionDays kept. Peer, same run: the same work with
retention off.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from benchlib.event_store import commit_payload
from benchlib.harness import Bench
from mplp_lsp.config.settings import Settings
from mplp_lsp.drift import Strategy
from mplp_lsp.engine.intake import Submission
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.protocol.envelope import new_id, utc_timestamp
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.sources.debounce import Change
from mplp_lsp.store import writer as store_writer

if TYPE_CHECKING:
    from tests.gitrepo import Repo

TARGET_MB = 300.0
START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SAVES, COMMITS, TOOL_RUNS, CI_RUNS = 150, 6, 20, 2
ROUND = 30  # files saved between two pauses of the day

bench = Bench(__doc__)
bench.size("--days", full=450, quick=12, help="days of work simulated")
bench.size("--files", full=300, quick=40, help="files in the workspace")


class Clock:
    """The simulation's time: the store stamps arrivals with it."""

    def __init__(self) -> None:
        self.now = START

    def stamp(self, moment: datetime | None = None) -> str:
        return utc_timestamp(moment or self.now)


def module_text(rng: random.Random, name: str, revision: int) -> str:
    lines = [f'"""{name}, revision {revision}."""', ""]
    for n in range(rng.randint(20, 120)):
        lines.append(f"def step_{n}(value: int) -> int:")
        lines.append(f"    return value * {rng.randint(2, 99)} + {revision}")
        lines.append("")
    return "\n".join(lines)


def day_of_work(rng: random.Random, clock: Clock) -> list[Submission]:
    at = clock.stamp
    out: list[Submission] = []
    for _ in range(COMMITS):
        out.append(Submission(Kind.GIT, commit_payload(rng, at()), "git"))
    for _ in range(TOOL_RUNS):
        run = {"tool_id": "pytest-8.3.3", "tool_kind": "test_runner", "invocation_id": new_id()}
        out.append(Submission(Kind.TOOL, {**run, "status": "started", "started_at": at()}, "tool"))
        ended = {**run, "status": "succeeded", "started_at": at(), "completed_at": at()}
        out.append(Submission(Kind.TOOL, {**ended, "exit_code": 0}, "tool"))
    for _ in range(CI_RUNS):
        ci = {"ci_provider": "github_actions", "pipeline_id": "ci.yml", "run_id": new_id()}
        out.append(Submission(Kind.CI, {**ci, "status": "running", "started_at": at()}, "ci"))
        done = {**ci, "status": "succeeded", "started_at": at(), "completed_at": at()}
        out.append(Submission(Kind.CI, done, "ci"))
    return out


async def simulate(
    root: Path, state: Path, days: int, files: int, settings: Settings, *, compact: bool
) -> dict[str, Any]:
    from tests.gitrepo import Repo

    rng = random.Random(35)
    clock = Clock()
    stamping = mock.patch.object(store_writer, "utc_timestamp", clock.stamp)
    stamping.start()  # arrivals are stamped with the day's time
    names = [f"src/pkg{n % 12}/module_{n}.py" for n in range(files)]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(module_text(rng, name, 0))
    revisions = dict.fromkeys(names, 0)
    repo = Repo.create(root)  # the workspace is a repository, its first commit made
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "the first modules")
    ws = await Workspace.open(root, settings, state_dir=state)
    await ws.owner.compaction.close()  # the simulation runs the passes, one a day
    figures: dict[str, Any] = {}
    try:
        for name in names:
            ws.observe(Change.CREATED, name)
        await ws.settle()
        for day in range(days):
            clock.now = START + timedelta(days=day)
            if clock.now.weekday() < 5:
                # A day's saves, spread over the day: each round's files saved once.
                for _ in range(SAVES // ROUND):
                    for name in rng.sample(names, min(ROUND, len(names))):
                        revisions[name] += 1
                        (root / name).write_text(module_text(rng, name, revisions[name]))
                        ws.observe(Change.MODIFIED, name)
                    await ws.settle()
                await ws.intake.submit_many(day_of_work(rng, clock))
                await ws.settle()
            if compact:
                await ws.owner.compaction.run_once(now=clock.now + timedelta(hours=20))
            if day + 1 == min(days, 365):
                figures["year"] = await size_of(ws)
        figures["end"] = await size_of(ws)
        figures.update(contents(state, clock))
        figures["restores"] = await drift_and_merge(ws, repo, names, revisions)
    finally:
        await ws.close()
        stamping.stop()
    return figures


async def size_of(ws: Workspace) -> float:
    """The store's files on disk, in MB, after a checkpoint (the WAL holds up to 32 MiB of
    pages between two; both runs are measured alike)."""
    await ws.writer.read(lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
    files = [ws.paths.database, ws.paths.database.with_name("events.db-wal")]
    return sum(p.stat().st_size for p in files if p.exists()) / 1e6


def contents(state: Path, clock: Clock) -> dict[str, Any]:
    conn = sqlite3.connect(state / "events.db")
    try:
        count, oldest = conn.execute("SELECT count(*), min(received_at) FROM events").fetchone()
        snapshots, snapshot_bytes = conn.execute(
            "SELECT count(*), coalesce(sum(length(content)), 0) FROM psg_snapshots"
        ).fetchone()
        removed = conn.execute(
            "SELECT coalesce(sum(value), 0) FROM counters WHERE name = 'retention_removed'"
        ).fetchone()[0]
    finally:
        conn.close()
    age = (clock.now - datetime.fromisoformat(oldest.replace("Z", "+00:00"))).days
    return {
        "events": count,
        "removed": removed,
        "oldest_age_days": age,
        "snapshots": snapshots,
        "snapshot_mb": snapshot_bytes / 1e6,
    }


async def drift_and_merge(
    ws: Workspace, repo: Repo, names: list[str], revisions: dict[str, int]
) -> str:
    """A file saved in the last days, committed, then changed behind the daemon's back: found
    as drift and merged (the commit is the merge's base); changed again, and restored by "PSG
    wins" from its snapshot."""
    root = repo.path
    recent = max(names, key=lambda name: revisions[name])
    recorded = (root / recent).read_text()
    repo.git("commit", "-q", "-m", "the day's work", "--", recent)
    (root / recent).write_text(recorded + "\n# a note added outside the editor\n")
    await ws.drift.scan()
    if recent not in ws.drift.open_drifts:
        return f"NOT found: no drift for {recent}"
    merged = await ws.drift.resolve(recent, Strategy.MERGE)
    (root / recent).write_text("overwritten\n")
    await ws.drift.scan()
    restored = await ws.drift.resolve(recent, Strategy.PSG)
    back = (root / recent).read_text()
    if merged.ok and restored.ok and back.startswith(recorded.rstrip("\n")):
        return f"ok ({recent}: merged, then restored)"
    return f"NOT ok: merge {merged.message!r}, restore {restored.message!r}"


def main() -> None:
    with bench.run() as args:
        runs: dict[str, dict[str, Any]] = {}
        # The peer is the previous release: no retention, no compaction pass at all.
        for name, retention in (("default retention", True), ("retention off", False)):
            with tempfile.TemporaryDirectory(prefix="bench-growth-") as folder:
                root, state = Path(folder) / "work", Path(folder) / "state"
                root.mkdir()
                values: dict[str, Any] = {"debounce_ms": 0, "max_wait_ms": 0, "drift_interval": 0}
                if not retention:
                    values |= {"retention_days": 0, "store_max_mb": 0}
                began = time.perf_counter()
                settings = Settings(**values)
                work = simulate(root, state, args.days, args.files, settings, compact=retention)
                runs[name] = asyncio.run(work)
                runs[name]["seconds"] = time.perf_counter() - began
        report(runs, args.days)


def report(runs: dict[str, dict[str, Any]], days: int) -> None:
    kept, off = runs["default retention"], runs["retention off"]
    print(
        f"{days} simulated days ({days * 5 // 7} working days): {kept['seconds']:.0f} s and {off['seconds']:.0f} s"
    )
    year = min(days, 365)
    bench.figure(
        f"store on disk after {year} days",
        kept["year"],
        "MB",
        target=f"<= {TARGET_MB:.0f} MB",
        met=kept["year"] <= TARGET_MB,
        peer=("retention off", off["year"]),
    )
    bench.figure(
        f"store on disk after {days} days", kept["end"], "MB", peer=("retention off", off["end"])
    )
    settings = Settings()
    horizon = settings.retention_days
    whole = kept["oldest_age_days"] >= min(days - 1, horizon) - 1
    bench.figure(
        f"events kept ({kept['removed']:,} removed; the oldest stored {kept['oldest_age_days']} days before the end)",
        kept["events"],
        "events",
        target=f"the last {horizon} days kept",
        met=whole and kept["oldest_age_days"] <= horizon,
        peer=("retention off", off["events"]),
    )
    bench.figure(
        f"file snapshots ({kept['snapshots']:,}, compressed)",
        kept["snapshot_mb"],
        "MB",
        peer=("retention off", off["snapshot_mb"]),
    )
    print(f"drift and merge on a file saved in the last week: {kept['restores']}")


if __name__ == "__main__":
    main()

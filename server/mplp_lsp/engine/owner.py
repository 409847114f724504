"""The writer side of one store: the intake, the bus and every consumer of stored events.

Whoever holds a state dir's lock (the daemon's :class:`~mplp_lsp.engine.workspace.Workspace`, or a
CLI process storing directly through :mod:`mplp_lsp.engine.handoff`) runs the same owner, so an
event has the same consequences (PSG updates, invocation state, ...) whoever stored it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.bus import EventBus
from mplp_lsp.engine.compaction import Compaction, policy_of
from mplp_lsp.engine.intake import Intake
from mplp_lsp.engine.statedir import StatePaths
from mplp_lsp.graph.commits import CommitGraph
from mplp_lsp.graph.files import FileNodes
from mplp_lsp.graph.repository_commits import RepositoryCommits
from mplp_lsp.graph.service import PsgService
from mplp_lsp.graph.tool_invocations import ToolInvocations
from mplp_lsp.plans.runs import PlanRuns
from mplp_lsp.protocol.envelope import FamilyForm
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.errorlog import IntegrationErrorLog
from mplp_lsp.store.positions import ConsumerPosition
from mplp_lsp.store.writer import StoreWriter

# PSG file work waits for the intake to be idle this long, and at most DERIVED_WORK_LIMIT
# (seconds): a 20,000-path burst is stored in about 2 s with it, 3 s when its consequences
# compete with it (bench/bench_lsp.py --only burst).
DERIVED_WORK_SETTLE = 0.05
DERIVED_WORK_LIMIT = 2.0


class StoreOwner:
    def __init__(
        self, root: Path, settings: Settings, paths: StatePaths, writer: StoreWriter
    ) -> None:
        self.root = root
        self.paths = paths
        self.settings = settings
        self.writer = writer
        self.bus = EventBus()
        self.error_log = IntegrationErrorLog(paths.error_log)
        self.intake = Intake(
            writer,
            self.bus,
            self.error_log,
            root=root,
            family=family(settings),
            state_dir=paths.root,
        )
        self._files_executor = ThreadPoolExecutor(1, thread_name_prefix="mplp-files")
        self.file_nodes = FileNodes(
            root,
            writer,
            self.intake,
            self._files_executor,
            snapshot_cap=settings.snapshot_max_bytes,
        )
        # Each consumer of the graph keeps its position in the store and catches up from the
        # log at start: the graph equals the log after any crash (mplp_lsp.store.positions).
        self.bus.subscribe(
            "psg-files",
            self.file_nodes.handle,
            kinds={Kind.FILE_UPDATE.value},
            gate=partial(self.intake.quiet, DERIVED_WORK_SETTLE, DERIVED_WORK_LIMIT),
            position=ConsumerPosition(writer, "psg-files"),
        )
        self.commit_graph = CommitGraph(
            writer, self.intake, RepositoryCommits(root, lambda: self.settings.git_author_email)
        )
        self.bus.subscribe(
            "psg-git",
            self.commit_graph.handle,
            kinds={Kind.GIT.value},
            position=ConsumerPosition(writer, "psg-git"),
        )
        self.tool_invocations = ToolInvocations(writer)
        self.bus.subscribe(
            "tools",
            self.tool_invocations.handle,
            kinds={Kind.TOOL.value},
            position=ConsumerPosition(writer, "tools"),
        )
        self.psg = PsgService(writer, self.intake)
        self.bus.subscribe(
            "psg-ci",
            self.psg.handle_ci,
            kinds={Kind.CI.value},
            position=ConsumerPosition(writer, "psg-ci"),
        )
        self.plans = PlanRuns(self)
        # Retention and compaction (docs/daemon.md): out of the way of bursts, and its first
        # pass comes only once the owner has been quiet for a while, so a CLI process that
        # stores one event and exits never runs it.
        self.compaction = Compaction(
            writer, lambda: policy_of(self.settings), self.intake.quiet, self.drain
        )

    async def start(self) -> None:
        """Finish what a crash interrupted (PSG events not yet handed to the intake), and
        start keeping the store within its retention settings."""
        await self.psg.start()
        self.compaction.start()

    def apply_settings(self, settings: Settings) -> None:
        self.settings = settings
        self.intake.family = family(settings)
        self.file_nodes.snapshot_cap = settings.snapshot_max_bytes

    async def drain(self) -> None:
        """Wait until consumers have handled everything, including what they submitted."""
        await self.bus.drain()
        await self.bus.drain()

    async def close(self) -> None:
        """Stop the consumers; the caller closes the writer afterwards."""
        try:
            await self.compaction.close()
            await self.plans.close()
            await self.bus.close()
            await self.psg.close()
        finally:
            self.commit_graph.close()
            self._files_executor.shutdown(wait=True)
            self.error_log.close()


def family(settings: Settings) -> FamilyForm:
    return FamilyForm.UPSTREAM if settings.event_family == "upstream" else FamilyForm.SPEC

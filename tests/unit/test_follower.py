"""A second daemon on a busy store follows the owner, then takes the store over (follower.py)."""

from __future__ import annotations

import time
from pathlib import Path

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.follower import Follower
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.engine.workspaces import Workspaces
from mplp_lsp.sources.debounce import Change
from tests.e2e.harness import read_events
from tests.support.waiting import wait_until_async

TAKEOVER_LIMIT_S = 5.0


def _updates(state: Path) -> list[tuple[str, str]]:
    return sorted(
        (e["payload"]["file_path"], e["payload"]["change_type"])
        for e in read_events(state, "file_update")
    )


async def test_second_daemon_hands_over_then_takes_over(tmp_path: Path) -> None:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    state = tmp_path / "state"
    settings = Settings(debounce_ms=50)
    owner, second = Workspaces(state_dir=state), Workspaces(state_dir=state)
    first = await owner.add(root, settings)
    assert isinstance(first, Workspace)
    follower = await second.add(root, settings)
    assert isinstance(follower, Follower)
    assert follower.status()["role"] == "follower"
    promoted: list[Workspace] = []

    async def on_promoted(workspace: Workspace) -> None:
        promoted.append(workspace)

    second.on_promoted(on_promoted)

    # Both report b.py's save (the second editor saved it, the first one's watcher saw it).
    (root / "b.py").write_text("b = 1\n")
    second.observe(Change.MODIFIED, root / "b.py")
    await wait_until_async(lambda: follower.handed == 1)
    await wait_until_async(lambda: _updates(state) == [("b.py", "modified")])
    owner.observe(Change.MODIFIED, root / "b.py", origin="watcher")
    await first.settle()

    await owner.close()
    gone_at = time.monotonic()
    await wait_until_async(lambda: bool(promoted), timeout=TAKEOVER_LIMIT_S + 5)
    assert time.monotonic() - gone_at <= TAKEOVER_LIMIT_S
    assert second.roots == (root,) and not second.followers
    (root / "b.py").write_text("b = 2\n")
    second.observe(Change.MODIFIED, root / "b.py")
    await promoted[0].settle()
    await second.close()
    assert _updates(state) == [("b.py", "modified")] * 2

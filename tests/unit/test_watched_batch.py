"""A watcher's batch of reports (``Workspaces.observe_many``) records what the same reports
observed one by one record: the same events in the same order, the same refusals, the same
paths ignored. Both run on a real store over a Git repository whose files were there before
recording began, so a report of a file recorded at start is ``modified`` or ``deleted``,
never ``created``."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mplp_lsp.config.settings import Settings
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.engine.workspaces import Workspaces
from mplp_lsp.sources.debounce import WATCHER, Change
from tests.support.properties import examples

pytestmark = pytest.mark.unit

# There before recording began: recorded by the start-up catch-up.
BEFORE = {
    ".gitignore": "*.log\nbuild/\n",
    "keep.txt": "kept\n",
    "src/a.py": "a = 1\n",
    "src/b.py": "b = 1\n",
    "old.txt": "old\n",
    "notes.log": "ignored\n",
    "build/out.o": "ignored\n",
}
# Names a report may carry: files changed, created and deleted after the start, ignored
# ones, a new directory (its ignore files are read before its paths are judged), temporary
# and scratch names, a directory, names that need escaping in a URI, and the folder itself.
NAMES = [
    "keep.txt",
    "src/a.py",
    "src/b.py",
    "old.txt",
    "src/new.py",
    "deep/er/new.txt",
    "new.log",
    "build/new.o",
    "src/.#a.py",
    "src/.mplp-restore-1",
    "newdir",
    "with space é.txt",
    "gone-never-there.txt",
    "",
]
# How a report names a path: a URI (escaped as an editor escapes it), an absolute path, or
# somewhere else altogether (refused).
FORMS = ["uri", "uri", "uri", "path", "path", "outside", "host", "not-file"]
REPORT = st.tuples(
    st.sampled_from([Change.CREATED, Change.MODIFIED, Change.DELETED]),
    st.sampled_from(NAMES),
    st.sampled_from(FORMS),
)


def _tree(root: Path) -> None:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name, text in BEFORE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _change_the_disk(root: Path) -> None:
    """What happened once recording began."""
    (root / "src" / "a.py").write_text("a = 2  # changed\n")
    (root / "old.txt").unlink()
    (root / "src" / "new.py").write_text("new\n")
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "new.txt").write_text("new\n")
    (root / "new.log").write_text("ignored\n")
    (root / "build" / "new.o").write_text("ignored\n")
    (root / "src" / ".#a.py").write_text("lock\n")
    (root / "src" / ".mplp-restore-1").write_text("scratch\n")
    (root / "newdir").mkdir()
    (root / "with space é.txt").write_text("spaced\n")


def _raw(root: Path, name: str, form: str) -> str:
    path = root / name if name else root
    return {
        "uri": path.as_uri(),
        "path": str(path),
        "outside": (root.parent / "elsewhere" / (name or "x")).as_uri(),
        "host": "file://otherhost" + str(path),
        "not-file": "untitled:" + str(path),
    }[form]


def _recorded(state: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{state / 'events.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT body FROM events WHERE kind = 'file_update' ORDER BY seq")
        payloads = [json.loads(body)["payload"] for (body,) in rows]
    finally:
        conn.close()
    return [(p["file_path"], p["change_type"], p.get("previous_path")) for p in payloads]


async def _record(
    base: Path, reports: list[tuple[Change, str, str]], *, batch: bool
) -> tuple[list[tuple[Any, ...]], int, int]:
    root = (base / "ws").resolve()
    _tree(root)
    workspaces = Workspaces(state_dir=base / "state")
    # Heard of from now on: what the folder holds is its baseline. Nothing settles on a timer: the order is the reports', not the machine's speed.
    workspace = await workspaces.add(
        root, Settings(debounce_ms=60_000, max_wait_ms=60_000), named_ns=time.time_ns()
    )
    assert isinstance(workspace, Workspace)
    await workspace.files.learnt()
    _change_the_disk(root)
    raws = [(change, _raw(root, name, form)) for change, name, form in reports]
    file_uris = [(change, raw) for change, raw in raws if raw.startswith(("file:", "/"))]
    if batch:
        workspaces.observe_many(file_uris, origin=WATCHER)
    else:
        for change, raw in file_uris:
            workspaces.observe(change, raw, origin=WATCHER)
    await workspace.settle()
    ignored = workspace.files.ignored
    refused = workspaces.refused
    await workspaces.close()
    return _recorded(base / "state"), refused, ignored


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(REPORT, min_size=1, max_size=20))
@example(  # a new directory first: what follows waits for its ignore files, in order
    [
        (Change.CREATED, "deep/er/new.txt", "uri"),
        (Change.CREATED, "src/new.py", "uri"),
        (Change.MODIFIED, "src/a.py", "path"),
        (Change.CREATED, "with space é.txt", "uri"),
        (Change.DELETED, "old.txt", "uri"),
    ]
)
def test_a_batch_records_what_one_by_one_records(
    tmp_path_factory: pytest.TempPathFactory, reports: list[tuple[Change, str, str]]
) -> None:
    one_by_one = asyncio.run(_record(tmp_path_factory.mktemp("single"), reports, batch=False))
    batched = asyncio.run(_record(tmp_path_factory.mktemp("batch"), reports, batch=True))
    assert batched == one_by_one


def test_a_batch_of_a_burst_records_every_new_file_once(tmp_path: Path) -> None:
    """Files created after the start, in directories new and old, each one ``created``;
    the files there before, reported too, ``modified`` only where they changed."""
    reports = [(Change.CREATED, f"src/n{i}.txt", "uri") for i in range(300)]
    reports += [(Change.CREATED, name, "uri") for name in ("keep.txt", "src/a.py", "src/new.py")]

    async def run() -> list[tuple[Any, ...]]:
        root = (tmp_path / "ws").resolve()
        _tree(root)
        workspaces = Workspaces(state_dir=tmp_path / "state")
        workspace = await workspaces.add(root, Settings(debounce_ms=50), named_ns=time.time_ns())
        assert isinstance(workspace, Workspace)
        await workspace.files.learnt()
        _change_the_disk(root)
        for i in range(300):
            (root / "src" / f"n{i}.txt").write_text(str(i))
        workspaces.observe_many(
            [(change, _raw(root, name, form)) for change, name, form in reports], origin=WATCHER
        )
        await workspace.settle()
        await workspaces.close()
        return _recorded(tmp_path / "state")

    recorded = asyncio.run(run())
    expected = [(f"src/n{i}.txt", "created", None) for i in range(300)]
    expected += [("src/a.py", "modified", None), ("src/new.py", "created", None)]
    assert recorded == expected

"""No file-system walk or ignore-file read on the event loop: what must wait for one waits in
order while the loop goes on answering. Nothing here measures time: the tests check which
thread read the files and what the loop did before the work was finished."""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.ignore import rules as ignore
from mplp_lsp.ignore.judge import InOrderJudge
from mplp_lsp.ignore.rules import IgnoreRules
from mplp_lsp.lsp.app import create_server
from tests.support.lsp import INITIALIZE, exchange, request

FILES = 20_000


def tree(root: Path, directories: int, per_directory: int) -> list[str]:
    paths = []
    for d in range(directories):
        folder = root / f"d{d}" / "sub"
        folder.mkdir(parents=True)
        (root / f"d{d}" / ".gitignore").write_text("*.log\nsub/skip/\n", encoding="utf-8")
        for f in range(per_directory):
            name = f"f{f}.log" if f % 10 == 0 else f"f{f}.py"
            (folder / name).touch()
            paths.append(f"d{d}/sub/{name}")
    return paths


async def test_a_directory_rename_of_20k_files_lets_a_request_through(tmp_path: Path) -> None:
    moved = tmp_path / "new"
    moved.mkdir()
    for i in range(FILES):
        (moved / f"f{i}").touch()
    server = create_server()
    renamed: list[tuple[str, str | None]] = []
    observed_when_answered: list[int] = []

    def activity(change: str, uri: str, *, previous: str | None = None, **_: Any) -> None:
        renamed.append((uri, previous))

    server.activity = activity  # type: ignore[method-assign]
    rename = {
        "jsonrpc": "2.0",
        "method": "workspace/didRenameFiles",
        "params": {"files": [{"oldUri": (tmp_path / "old").as_uri(), "newUri": moved.as_uri()}]},
    }
    sent = await exchange(server, [INITIALIZE, rename, request(2, "mplp/status", {})], answers=2)
    observed_when_answered.append(len(renamed))
    [answer] = [m for m in sent if m.get("id") == 2]
    assert answer["result"]["ready"] is False
    # The status was answered before the rename was observed in full (a walk on the loop
    # would have finished first), and then every file was observed, with its old name.
    assert observed_when_answered[0] < FILES
    for _ in range(1000):
        if len(renamed) == FILES:
            break
        await asyncio.sleep(0.01)
    assert len(renamed) == FILES
    old = (tmp_path / "old").as_uri()
    assert (moved.joinpath("f7").as_uri(), f"{old}/f7") in renamed


def reads_on(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads that read ignore files from now on."""
    threads: list[int] = []
    original = ignore._read_rules

    def spy(path: Path, base: str, *, follow: bool) -> list[Any]:
        threads.append(threading.get_ident())
        return original(path, base, follow=follow)

    monkeypatch.setattr(ignore, "_read_rules", spy)
    return threads


async def test_ignore_files_are_read_off_the_loop_and_paths_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = tree(tmp_path, directories=150, per_directory=20)
    oracle = IgnoreRules(tmp_path)
    expected = [p for p in paths if not oracle.is_ignored(p)]
    rules = IgnoreRules(tmp_path)
    threads = reads_on(monkeypatch)
    admitted: list[str] = []
    ignored: list[int] = []
    judge = InOrderJudge(lambda: rules, on_ignored=lambda: ignored.append(1))
    ticks_before_done: list[int] = []

    async def ticker() -> None:
        while judge.waiting:
            ticks_before_done.append(judge.waiting)
            await asyncio.sleep(0)

    answers = [judge.submit(path, partial(admitted.append, path)) for path in paths]
    assert answers[0] is None  # its directory's .gitignore is not read yet
    await asyncio.gather(ticker(), judge.settled())

    assert admitted == expected
    assert len(ignored) == len(paths) - len(expected) > 0
    loop_thread = threading.get_ident()
    assert threads and loop_thread not in threads
    assert ticks_before_done  # the loop ran other work while files were read
    # Now every directory is known: a path is judged at once, reading nothing.
    assert judge.submit("d3/sub/again.py", lambda: admitted.append("again")) is True
    assert admitted[-1] == "again"


async def test_a_burst_into_one_new_folder_is_judged_with_the_loop_turning_meanwhile(
    tmp_path: Path,
) -> None:
    """One ignore file read, then 20,000 paths waiting behind it: judged a few milliseconds
    at a time, in order (all at once held the loop for about 240 ms)."""
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / ".gitignore").write_text("*.log\n", encoding="utf-8")
    paths = [f"new/f{i}.{'log' if i % 10 == 0 else 'py'}" for i in range(FILES)]
    rules = IgnoreRules(tmp_path)
    admitted: list[str] = []
    judge = InOrderJudge(lambda: rules, on_ignored=lambda: None)
    seen_while_judging: list[int] = []

    async def ticker() -> None:
        while judge.waiting:
            seen_while_judging.append(len(admitted))
            await asyncio.sleep(0)

    judge.submit_many([(path, path) for path in paths], admitted.extend)
    await asyncio.gather(ticker(), judge.settled())
    assert admitted == [path for path in paths if not path.endswith(".log")]
    assert [n for n in seen_while_judging if 0 < n < len(admitted)]  # a turn in the middle


async def test_an_ignore_file_changed_while_it_is_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".gitignore").write_text("old.txt\n", encoding="utf-8")
    rules = IgnoreRules(tmp_path)
    release = threading.Event()
    reading = threading.Event()
    original = ignore._read_rules

    def slow(path: Path, base: str, *, follow: bool) -> list[Any]:
        found = original(path, base, follow=follow)
        reading.set()
        release.wait(10)
        return found

    monkeypatch.setattr(ignore, "_read_rules", slow)
    admitted: list[str] = []
    judge = InOrderJudge(lambda: rules, on_ignored=lambda: None)
    judge.submit("d/new.txt", lambda: admitted.append("d/new.txt"))
    judge.submit("d/old.txt", lambda: admitted.append("d/old.txt"))
    await asyncio.to_thread(reading.wait, 10)
    # The file changes after it was read, before what was read is used.
    (tmp_path / "d" / ".gitignore").write_text("new.txt\n", encoding="utf-8")
    rules.invalidate("d/.gitignore")
    release.set()
    monkeypatch.setattr(ignore, "_read_rules", original)
    await judge.settled()
    assert admitted == ["d/old.txt"]

"""The VSL contract, one suite run against every backend; and crash safety of sqlite."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.values import (
    FileVsl,
    SqliteVsl,
    ValueStateLayer,
    VslError,
    VslKeyError,
    VslValueError,
    default_url,
    open_vsl,
)
from mplp_lsp.values.files import file_name
from tests.support.properties import examples

BACKENDS = ("memory", "sqlite", "file")


def url_for(backend: str, tmp: Path) -> str:
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite://{tmp / 'vsl.sqlite3'}"
    return f"file://{tmp / 'values'}"


@pytest.fixture(params=BACKENDS)
async def vsl(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ValueStateLayer]:
    layer = open_vsl(url_for(request.param, tmp_path))
    yield layer
    await layer.close()


async def test_read_after_write(vsl: ValueStateLayer) -> None:
    value = {"a": [1, 2.5, None, True, "ü"], "b": {"c": ""}}
    await vsl.set("state", value)
    assert await vsl.get("state") == value
    await vsl.set("state", 3)
    assert await vsl.get("state") == 3


async def test_missing_key_gives_the_default(vsl: ValueStateLayer) -> None:
    assert await vsl.get("nothing") is None
    assert await vsl.get("nothing", "fallback") == "fallback"
    await vsl.set("null", None)
    assert await vsl.get("null", "fallback") is None or await vsl.get("null") is None


async def test_returned_values_are_copies(vsl: ValueStateLayer) -> None:
    original = {"list": [1]}
    await vsl.set("k", original)
    original["list"].append(2)
    got = await vsl.get("k")
    got["list"].append(3)
    assert await vsl.get("k") == {"list": [1]}


@pytest.mark.parametrize("bad", [b"bytes", {1, 2}, math.nan, object(), {1: "int key"}])
async def test_non_json_values_are_refused_and_store_nothing(
    vsl: ValueStateLayer, bad: object
) -> None:
    await vsl.set("k", "before")
    with pytest.raises(VslValueError):
        await vsl.set("k", bad)
    assert await vsl.get("k") == "before"


@pytest.mark.parametrize("bad", ["", None, 3])
async def test_keys_are_non_empty_strings(vsl: ValueStateLayer, bad: object) -> None:
    with pytest.raises(VslKeyError):
        await vsl.set(bad, 1)  # type: ignore[arg-type]
    with pytest.raises(VslKeyError):
        await vsl.get(bad)  # type: ignore[arg-type]


async def test_awkward_keys_stay_apart(vsl: ValueStateLayer) -> None:
    keys = [".", "..", "a/b", "../escape", "A", "a", "k%2E", "k.", "x" * 500, "x" * 501, "é", "\n"]
    for index, key in enumerate(keys):
        await vsl.set(key, index)
    assert [await vsl.get(key) for key in keys] == list(range(len(keys)))


async def test_transaction_commits_together(vsl: ValueStateLayer) -> None:
    async with vsl.transaction():
        await vsl.set("a", 1)
        await vsl.set("b", 2)
        assert await vsl.get("a") == 1  # reads its own writes
    assert (await vsl.get("a"), await vsl.get("b")) == (1, 2)


async def test_transaction_that_raises_stores_nothing(vsl: ValueStateLayer) -> None:
    await vsl.set("a", "old")
    with pytest.raises(RuntimeError):
        async with vsl.transaction():
            await vsl.set("a", "new")
            await vsl.set("b", "new")
            raise RuntimeError("boom")
    assert (await vsl.get("a"), await vsl.get("b")) == ("old", None)


async def test_other_tasks_never_see_half_a_transaction(vsl: ValueStateLayer) -> None:
    await vsl.set("a", 0)
    await vsl.set("b", 0)
    inside = asyncio.Event()
    release = asyncio.Event()

    async def writer() -> None:
        async with vsl.transaction():
            await vsl.set("a", 1)
            inside.set()
            await release.wait()
            await vsl.set("b", 1)

    async def reader() -> tuple[int, int]:
        await inside.wait()
        return await vsl.get("a"), await vsl.get("b")

    task = asyncio.create_task(writer())
    read = asyncio.create_task(reader())
    await inside.wait()
    await asyncio.sleep(0)
    release.set()
    await task
    assert await read in ((0, 0), (1, 1))


async def test_concurrent_writers_leave_one_whole_value(vsl: ValueStateLayer) -> None:
    values = [{"writer": n, "blob": [n] * 50} for n in range(20)]
    await asyncio.gather(*(vsl.set("shared", v) for v in values))
    assert await vsl.get("shared") in values
    await asyncio.gather(*(vsl.set(f"own-{n}", n) for n in range(20)))
    assert [await vsl.get(f"own-{n}") for n in range(20)] == list(range(20))


async def test_persistent_backends_keep_values_across_reopen(tmp_path: Path) -> None:
    for backend in ("sqlite", "file"):
        first = open_vsl(url_for(backend, tmp_path))
        await first.set("kept", [backend])
        await first.close()
        second = open_vsl(url_for(backend, tmp_path))
        assert await second.get("kept") == [backend]
        await second.close()


def test_urls_pick_the_backend(tmp_path: Path) -> None:
    assert isinstance(open_vsl(f"sqlite://{tmp_path}/v.db"), SqliteVsl)
    assert isinstance(open_vsl(f"file://{tmp_path}/d"), FileVsl)
    default = open_vsl(default_url(tmp_path))
    assert isinstance(default, SqliteVsl) and default.path == tmp_path / "vsl.sqlite3"
    for bad in ("redis://host/0", "sqlite://relative.db", "file://remote-host/dir"):
        with pytest.raises(VslError):
            open_vsl(bad)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_file_names_are_safe_and_distinct(key: str) -> None:
    name = file_name(key)
    assert "/" not in name and name not in (".", "..") and not name.startswith(".")
    assert len(name.encode()) < 255
    assert all(c.isascii() and (c.isalnum() or c in "-_%.") for c in name)
    if key.swapcase() != key:  # case-insensitive file systems must not alias two keys
        assert name.lower() != file_name(key.swapcase()).lower()


_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from mplp_lsp.values import SqliteVsl

    async def main() -> None:
        vsl = SqliteVsl(Path(sys.argv[1]))
        async with vsl.transaction():
            for n in range(200):
                await vsl.set(f"k{n}", "new")
                if n == 100:
                    print("inside", flush=True)
                    await asyncio.sleep(60)  # killed here
        print("committed", flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
    """
)


async def _seed(path: Path) -> None:
    vsl = SqliteVsl(path)
    async with vsl.transaction():
        for n in range(200):
            await vsl.set(f"k{n}", "old")
    await vsl.close()


async def _states(path: Path) -> set[str]:
    vsl = SqliteVsl(path)
    values = {await vsl.get(f"k{n}") for n in range(200)}
    await vsl.close()
    return values


async def test_kill_9_mid_transaction_leaves_the_old_state(tmp_path: Path) -> None:
    path = tmp_path / "vsl.sqlite3"
    await _seed(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, str(path), stdout=subprocess.PIPE, env=env
    )
    assert child.stdout is not None
    assert (await child.stdout.readline()).strip() == b"inside"
    child.send_signal(signal.SIGKILL)
    await child.wait()
    assert await _states(path) == {"old"}


async def test_kill_9_after_commit_leaves_the_new_state(tmp_path: Path) -> None:
    path = tmp_path / "vsl.sqlite3"
    await _seed(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    script = _CHILD.replace("if n == 100:", "if False:")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(path), stdout=subprocess.PIPE, env=env
    )
    assert child.stdout is not None
    assert (await child.stdout.readline()).strip() == b"committed"
    child.send_signal(signal.SIGKILL)
    await child.wait()
    assert await _states(path) == {"new"}

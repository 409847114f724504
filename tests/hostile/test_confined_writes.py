"""Nothing the daemon writes lands outside the workspace, whatever links the workspace holds.

The attack: a recorded file's parent directory is replaced by a link to a folder outside,
then the user asks for the recorded content back (``drift --resolve psg``) or a merge.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mplp_lsp.config.settings import parse_settings
from mplp_lsp.engine.workspace import Workspace
from mplp_lsp.sanitize import confined
from mplp_lsp.sources.debounce import Change

CLI = str(Path(sys.executable).with_name("mplp-lsp"))
RECORDED = ("keys/authorized_keys", "deep/sub/config")


@pytest.fixture
async def recorded(tmp_path: Path) -> tuple[Path, Path, Path]:
    root, state, outside = (tmp_path / "ws").resolve(), tmp_path / "state", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    settings, _ = parse_settings({"debounceMs": 0, "maxWaitMs": 0, "driftInterval": 0})
    workspace = await Workspace.open(root, settings, state_dir=state)
    for name in RECORDED:
        (root / name).parent.mkdir(parents=True)
        (root / name).write_text(f"recorded {name}\n")
        workspace.observe(Change.CREATED, name)
    await workspace.settle()
    await workspace.bus.drain()
    await workspace.close()
    return root, state, outside


def drift(root: Path, state: Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [CLI, "drift", "--json", "--state-dir", str(state), *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def everything_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.parametrize("strategy", ["psg", "merge"])
@pytest.mark.parametrize("linked", ["keys", "deep"])
async def test_a_linked_parent_is_refused_and_nothing_appears_outside(
    recorded: tuple[Path, Path, Path], strategy: str, linked: str
) -> None:
    root, state, outside = recorded
    if strategy == "merge":  # a merge needs the file on disk: the same name outside
        (outside / "sub").mkdir()
        for name in ("authorized_keys", "sub/config"):
            (outside / name).write_text("outside\n")
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    listing = everything_under(outside)
    moved = root / f"{linked}.real"
    (root / linked).rename(moved)
    (root / linked).symlink_to(outside, target_is_directory=True)
    path = next(name for name in RECORDED if name.startswith(linked))
    report = drift(root, state, "--resolve", strategy, path)
    results = report["resolved"]
    assert isinstance(results, list)
    assert [(r["path"], r["ok"], r.get("code")) for r in results] == [
        (path, False, "path_symlink_escape")
    ]
    assert everything_under(outside) == listing
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before


def test_confined_writes_refuse_any_link_on_the_way(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "inner").mkdir(parents=True)
    (root / "alias").symlink_to(root / "inner")  # pointing back inside: still refused
    with pytest.raises(confined.PathEscape) as refused:
        confined.write_bytes(root, "alias/new/file", b"x", prefix=".t-")
    assert refused.value.code == "path_symlink_escape"
    assert everything_under(root / "inner") == []
    (root / "inner" / "file").write_text("kept\n")
    (root / "link").symlink_to(root / "inner" / "file")
    with pytest.raises(confined.PathEscape):
        confined.read_bytes(root, "link")
    confined.write_bytes(root, "made/on/the/way", b"new\n", prefix=".t-")
    assert (root / "made/on/the/way").read_bytes() == b"new\n"
    assert [p.name for p in (root / "made/on/the").iterdir()] == ["way"]  # no temp file left

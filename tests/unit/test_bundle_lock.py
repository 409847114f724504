"""The platform .vsix carries exactly the versions CI tested: requirements/bundle/<target>.lock
(hashed, written by .ci/lock-bundle from requirements/ci.lock) is what bundle_server.py
installs, and what a packaged .vsix holds is compared with it here."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from tests.required import unavailable
from tests.support.bundle import bundle_server

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "editors" / "vscode"
LOCKS = REPO / "requirements" / "bundle"
TARGETS = sorted(bundle_server.PLATFORMS)
LIBS = "extension/bundled/libs/"


def vsix_versions(vsix: Path) -> tuple[str, dict[str, str]]:
    """The target a platform .vsix was built for, and the versions in its bundled/libs."""
    with zipfile.ZipFile(vsix) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("extension/bundled/bundle.json"))
    folders = {
        name[len(LIBS) :].split("/")[0]
        for name in names
        if name.startswith(LIBS) and name[len(LIBS) :].split("/")[0].endswith(".dist-info")
    }
    return manifest["target"], bundle_server.dist_versions(folders)


def test_a_packaged_vsix_holds_exactly_the_locked_versions() -> None:
    packaged = sorted(EXTENSION.glob("mplp-lsp-*.vsix"))
    if not packaged:
        unavailable("no platform .vsix: run `npm run package -- --target linux-x64`")
    for vsix in packaged:
        target, versions = vsix_versions(vsix)
        assert "mplp-lsp" in versions  # the folder names were really read
        assert bundle_server.lock_differences(versions, LOCKS / f"{target}.lock") == []


@pytest.mark.parametrize("target", TARGETS)
def test_a_bundle_that_differs_from_the_lock_is_named(target: str) -> None:
    lock = LOCKS / f"{target}.lock"
    locked = bundle_server.locked_versions(lock)
    bundled = {**locked, "mplp-lsp": "9.9.9"}
    assert bundle_server.lock_differences(bundled, lock) == []
    name = next(iter(sorted(locked)))
    bundled[name] = locked[name] + ".post1"
    del bundled["pydantic"]
    bundled["left-over"] = "1.0"
    assert sorted(bundle_server.lock_differences(bundled, lock)) == [
        f"{name}: {locked[name]}.post1 in the bundle, {locked[name]} in {lock.name}",
        f"left-over: 1.0 in the bundle, not locked in {lock.name}",
        f"pydantic: not bundled in the bundle, {locked['pydantic']} in {lock.name}",
    ]


@pytest.mark.parametrize("target", TARGETS)
def test_each_bundle_lock_pins_the_ci_versions_with_hashes(target: str) -> None:
    lock = LOCKS / f"{target}.lock"
    ci = bundle_server.locked_versions(REPO / "requirements" / "ci.lock")
    locked = bundle_server.locked_versions(lock)
    assert {"pygls", "pydantic", "aiohttp"} <= locked.keys()
    stale = {
        name: (version, ci.get(name)) for name, version in locked.items() if ci.get(name) != version
    }
    assert stale == {}, "run .ci/lock-bundle after .ci/lock"
    # Each pin is followed by at least one hash: pip --require-hashes installs nothing else.
    pins = re.findall(r"^\S+==\S+ \\\n\s+--hash=sha256:[0-9a-f]{64}", lock.read_text(), re.M)
    assert len(pins) == len(locked)

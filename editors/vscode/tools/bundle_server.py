"""Installs mplp-lsp and its dependencies for one VS Code platform into ``bundled/libs``.

Run by ``npm run package -- --target T`` (tools/package.mjs) before ``vsce package``:

    python tools/bundle_server.py --target linux-x64 [--wheel dist/mplp_lsp-X-py3-none-any.whl]

pip installs exactly what ``requirements/bundle/<target>.lock`` pins (``.ci/lock-bundle``
writes it: the versions of ``requirements/ci.lock``, which CI tested, each file with its hash;
``--require-hashes --no-deps``), as binary wheels for the target's platform, once per supported
Python version into separate folders, which are then merged into one, and the merged folder is
checked against the lock: a package missing, extra or at another version stops the build.
Merging works because a compiled module's file name carries its Python version
(``_pydantic_core.cpython-312-x86_64-linux-gnu.so``), so one folder serves every version; an
``abi3`` module (jsonschema-rs, watchfiles) is shared by all of them. Any other file that
differs between the versions stops the build.

Downloads go through pip's own cache (~/.cache/pip), so a second build needs no network for
files it already has.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXTENSION = HERE.parent
REPO = EXTENSION.parent.parent
LOCKS = REPO / "requirements" / "bundle"

# The Pythons the bundle carries compiled modules for: requires-python (>=3.11) up to the
# newest release every binary dependency publishes wheels for.
PYTHONS = ("3.11", "3.12", "3.13", "3.14")

# pip's --platform tags per VS Code target. pip widens a manylinux tag to the older ones and a
# macOS tag to the earlier releases and to universal2. glibc 2.28 is what VS Code itself needs.
PLATFORMS = {
    "linux-x64": ("manylinux_2_28_x86_64", "manylinux2014_x86_64"),
    "linux-arm64": ("manylinux_2_28_aarch64", "manylinux2014_aarch64"),
    "darwin-x64": ("macosx_11_0_x86_64",),
    "darwin-arm64": ("macosx_11_0_arm64",),
    "win32-x64": ("win_amd64",),
}

# Packages whose compiled modules only make them faster: each falls back to its pure-Python
# implementation when the module is missing. Keeping them for four Python versions makes a
# .vsix of about 32 MB instead of about 19 MB; the daemon's HTTP traffic and YAML reading are
# small, so the bundle leaves them out and behaves the same on every Python.
OPTIONAL_SPEEDUPS = ("aiohttp", "frozenlist", "multidict", "propcache", "yarl", "yaml")
COMPILED = (".so", ".pyd")


class BundleError(Exception):
    """The bundle cannot be built as asked; the message says why."""


def package_version() -> str:
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    return str(manifest["version"])


def wheel_version(wheel: Path) -> str:
    """The version in a wheel's file name (name-version-python-abi-platform.whl)."""
    return wheel.name.split("-")[1]


def build_wheel(into: Path) -> Path:
    """The mplp-lsp wheel of this checkout (pip builds it with the project's build backend)."""
    pip(["wheel", "--no-deps", "--wheel-dir", str(into), str(REPO)])
    [wheel] = into.glob("mplp_lsp-*.whl")
    return wheel


def pip(args: list[str]) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    if subprocess.run(command, check=False).returncode != 0:
        raise BundleError(f"pip {args[0]} failed (see above)")


def lock_of(target: str) -> Path:
    return LOCKS / f"{target}.lock"


def install(wheel: Path, target: str, python: str, into: Path) -> None:
    """The wheel and the locked dependencies, as binary wheels for ``target`` and ``python``;
    every file checked against its hash, nothing resolved beyond the lock."""
    platforms = [arg for tag in PLATFORMS[target] for arg in ("--platform", tag)]
    # The wheel built here has no hash in any lock: its own, in a requirements file of one line.
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    own = into.with_name(f"{into.name}-wheel.txt")
    own.write_text(f"{wheel} --hash=sha256:{digest}\n", encoding="utf-8")
    pip(
        [
            "install",
            "--no-compile",
            "--only-binary=:all:",
            "--require-hashes",
            "--no-deps",
            "--implementation",
            "cp",
            "--python-version",
            python,
            *platforms,
            "--target",
            str(into),
            "--requirement",
            str(lock_of(target)),
            "--requirement",
            str(own),
        ]
    )


def normalized(name: str) -> str:
    """A distribution's name as package indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(lock: Path) -> dict[str, str]:
    """name → version of every ``name==version`` pin in a requirements file."""
    pins = re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", lock.read_text("utf-8"), re.M)
    return {normalized(pin[1]): pin[2] for pin in pins}


def dist_versions(folders: Iterable[str]) -> dict[str, str]:
    """name → version of the distributions whose ``name-version.dist-info`` folders these are."""
    found = {}
    for folder in folders:
        name, _, version = folder.removesuffix(".dist-info").rpartition("-")
        found[normalized(name)] = version
    return found


def lock_differences(installed: Mapping[str, str], lock: Path) -> list[str]:
    """How the installed distributions differ from the lock (mplp-lsp itself aside)."""
    bundled = {name: version for name, version in installed.items() if name != "mplp-lsp"}
    locked = locked_versions(lock)
    return [
        f"{name}: {bundled.get(name, 'not bundled')} in the bundle, "
        f"{locked.get(name, 'not locked')} in {lock.name}"
        for name in sorted(bundled.keys() | locked.keys())
        if bundled.get(name) != locked.get(name)
    ]


def merge(sources: dict[str, Path], libs: Path) -> None:
    """Copy every source folder into ``libs``; files they share must be identical.

    A package's ``*.dist-info`` differs between Pythons (the wheel tag, the RECORD of the
    compiled module), so the first one is kept: it is metadata the server never reads.
    """
    first: dict[Path, str] = {}
    for python, source in sources.items():
        for path in sorted(source.rglob("*")):
            if path.is_dir():
                continue
            relative = path.relative_to(source)
            destination = libs / relative
            if destination.exists():
                if relative.parts[0].endswith(".dist-info") or filecmp.cmp(
                    path, destination, shallow=False
                ):
                    continue
                raise BundleError(
                    f"{relative} differs between Python {first[relative]} and {python}: "
                    "pip picked different releases; pin the dependency in pyproject.toml"
                )
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
            first[relative] = python


def drop_optional_speedups(libs: Path) -> list[Path]:
    dropped = [
        path
        for package in OPTIONAL_SPEEDUPS
        for path in (libs / package).rglob("*")
        if path.suffix in COMPILED
    ]
    for path in dropped:
        path.unlink()
    return dropped


def bundle(target: str, wheel: Path | None, dest: Path) -> dict[str, object]:
    if target not in PLATFORMS:
        raise BundleError(f"no wheel set for target {target!r}; one of {', '.join(PLATFORMS)}")
    if not lock_of(target).is_file():
        raise BundleError(f"no {lock_of(target).relative_to(REPO)}: run .ci/lock-bundle")
    with tempfile.TemporaryDirectory(prefix="mplp-bundle-") as tmp:
        work = Path(tmp)
        wheel = wheel or build_wheel(work / "wheel")
        if wheel_version(wheel) != package_version():
            raise BundleError(
                f"{wheel.name} is version {wheel_version(wheel)} but package.json says "
                f"{package_version()}: the versions must agree (server/mplp_lsp/__init__.py)"
            )
        sources = {}
        for python in PYTHONS:
            print(f"bundle: mplp-lsp for {target}, Python {python}", file=sys.stderr)
            sources[python] = work / python
            install(wheel, target, python, sources[python])
        libs = dest / "libs"
        shutil.rmtree(libs, ignore_errors=True)
        libs.mkdir(parents=True)
        merge(sources, libs)
    installed = dist_versions(info.name for info in libs.glob("*.dist-info"))
    differences = lock_differences(installed, lock_of(target))
    if differences:
        raise BundleError("the bundle is not the lock: " + "; ".join(differences))
    # Console scripts pip wrote, with the build machine's interpreter in their first line.
    shutil.rmtree(libs / "bin", ignore_errors=True)
    drop_optional_speedups(libs)
    manifest: dict[str, object] = {
        "mplp_lsp": wheel_version(wheel),
        "target": target,
        "python": list(PYTHONS),
    }
    (dest / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def smoke_test(dest: Path) -> None:
    """On the build machine's own platform: the bundle imports with this Python (-B: without
    leaving __pycache__ folders behind to be packaged)."""
    libs = dest / "libs"
    imports = "import mplp_lsp.cli, pydantic_core, orjson, rpds, jsonschema_rs, aiohttp, yaml"
    code = f"import sys; sys.path[:0] = [{str(libs)!r}]; {imports}"
    command = [sys.executable, "-B", "-I", "-S", "-c", code]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BundleError(f"the bundle does not import here: {done.stderr.strip()}")


def host_target() -> str | None:
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
    arch = machine.get(platform.machine().lower())
    system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform)
    return f"{system}-{arch}" if arch and system else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, choices=sorted(PLATFORMS))
    parser.add_argument("--wheel", type=Path, help="the mplp-lsp wheel (default: build one)")
    parser.add_argument("--dest", type=Path, default=EXTENSION / "bundled")
    args = parser.parse_args(argv)
    try:
        if args.wheel is not None and not zipfile.is_zipfile(args.wheel):
            raise BundleError(f"{args.wheel} is not a wheel")
        manifest = bundle(args.target, args.wheel, args.dest)
        host = f"{sys.version_info.major}.{sys.version_info.minor}"
        if args.target == host_target() and host in PYTHONS:
            smoke_test(args.dest)
    except BundleError as error:
        print(f"bundle: {error}", file=sys.stderr)
        return 1
    print(f"bundle: {json.dumps(manifest)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

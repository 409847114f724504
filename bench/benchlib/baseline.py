"""An earlier release of mplp-lsp, built from this repository's history, as a benchmark's peer.

A target such as "the burst back under 1.2 s" was the first release's figure on the machine of
whoever measured it. On another machine the same code takes what that machine gives, so a
figure means most beside the first release measured in the same run. ``release_python(rev)``
installs the package as it was at ``rev`` (``git archive``, not a checkout: the clone is left as
it is) into a virtual environment of its own, with the libraries pinned at this checkout's
``requirements/ci.lock``, so the two differ only in mplp-lsp's own code. The environment is
kept under the user's cache folder and reused while it is whole.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The last commit of the first release (the end of its first round of work, before screening of
# recorded content, the in-order ignore judge and the settings files came).
FIRST_RELEASE = "a1bd6c573c47fb7afcf5ce333469c78821d8efcd"
_DONE = "installed"


class ReleaseUnavailable(Exception):
    """The release cannot be built here (a shallow clone, no package index): the reason."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mplp-lsp-bench"


def describe(rev: str) -> str:
    """How a figure names the release: the first one as such, any other by its commit."""
    first = len(rev) >= 7 and FIRST_RELEASE.startswith(rev.lower())
    return f"the first release ({rev[:7]})" if first else f"mplp-lsp at {rev}"


def release_python(rev: str) -> Path:
    """The interpreter of a virtual environment holding mplp-lsp as it was at ``rev``."""
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()
    home = cache_root() / f"release-{sha}"
    python = home / "venv" / "bin" / "python"
    if (home / _DONE).is_file() and python.is_file():
        return python
    shutil.rmtree(home, ignore_errors=True)
    began = time.perf_counter()
    source = home / "source"
    source.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(_git("archive", "--format=tar", sha))) as archive:
        archive.extractall(source, filter="data")
    _run(sys.executable, "-m", "venv", str(home / "venv"))
    _run(
        str(python),
        *("-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
        *("-c", str(REPO / "requirements" / "ci.lock"), str(source)),
    )
    # Compiled as pip compiles a user's install, so no run pays for it.
    subprocess.run([str(python), "-m", "compileall", "-q", str(home / "venv")], check=False)
    (home / _DONE).write_text(sha + "\n")
    print(f"built {describe(sha)} in {time.perf_counter() - began:.0f} s: {home}", flush=True)
    return python


def _git(*args: str) -> bytes:
    return _run("git", *args)


def _run(*argv: str) -> bytes:
    done = subprocess.run(argv, cwd=REPO, capture_output=True)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise ReleaseUnavailable(f"{' '.join(argv[:3])}: exit {done.returncode}: {lines[-1]}")
    return done.stdout

"""A real PostgreSQL for the team collector's tests: one throwaway cluster per session.

Outside CI, a machine without PostgreSQL's binaries or without psycopg skips these tests
with the reason; with CI=true they must run (.ci/run installs both).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import postgres, processes
from tests.required import unavailable

_names = itertools.count()


def _has_psycopg() -> bool:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return False
    return True


# Without the postgres extra these modules cannot even be imported: outside CI they are left
# out (test_cli_team.py's skip line says why); with CI=true the import error shows.
_PSYCOPG_MISSING = not _has_psycopg() and os.environ.get("CI") != "true"
collect_ignore_glob = ["test_pg_*.py", "test_team_*.py"] if _PSYCOPG_MISSING else []


def _unavailable() -> str | None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install '.[postgres]')"
    if postgres.binaries() is None:
        return "PostgreSQL's initdb is not installed (apt-get install postgresql)"
    return None


def throwaway_cluster() -> Iterator[postgres.Cluster]:
    """A fixture's body: a cluster of its own, stopped at the end."""
    reason = _unavailable()
    if reason is not None:
        unavailable(reason)
    bin_dir = postgres.binaries()
    assert bin_dir is not None
    cluster = postgres.start(bin_dir)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[postgres.Cluster]:
    yield from throwaway_cluster()


@pytest.fixture
def pg_url(pg_cluster: postgres.Cluster) -> str:
    """A fresh, empty database on the session's cluster (password-less URL)."""
    return pg_cluster.create_database(f"t{os.getpid()}_{next(_names)}")


TOKEN = "team-token-for-tests"
READ_TOKEN = "read-only-token-for-tests"


@dataclass
class Collector:
    process: subprocess.Popen[str]
    url: str

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        processes.stop(self.process)


def start_collector(
    db_url: str,
    cluster: postgres.Cluster,
    work: Path,
    *extra: str,
    port: int = 0,
    ready: bool = True,
    env: dict[str, str] | None = None,
) -> Collector:
    """``mplp-lsp collector serve --db <url>`` as a process; returns once it listens and,
    with ``ready``, once ``/ready`` says its database takes writes (as a balancer waits)."""
    read_tokens = work / "read-tokens"
    read_tokens.write_text(READ_TOKEN + "\n")
    env = {**cluster.env(), "MPLP_LSP_COLLECTOR_TOKEN": TOKEN, **(env or {})}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mplp_lsp",
            "collector",
            "serve",
            "--db",
            db_url,
            "--port",
            str(port),
            "--read-token-file",
            str(read_tokens),
            *extra,
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            collector = Collector(process, found.group(1))
            if ready:
                wait_ready(collector.url, deadline)
            return collector
    process.kill()
    raise RuntimeError(f"collector did not start: {process.stderr.read()}")


def ready_status(url: str) -> int:
    """``GET /ready``'s status; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"{url}/ready", timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def wait_ready(url: str, deadline: float) -> None:
    while ready_status(url) != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the collector at {url} did not get ready")
        time.sleep(0.05)

"""A throwaway PostgreSQL cluster for tests and benchmarks: Debian's binaries, a temp dir.

``initdb`` and ``postgres`` refuse to run as root, so as root they run as ``nobody`` (the
cluster's files are given to it). The server listens on 127.0.0.1 (a free port) and on a
unix socket inside the cluster's dir; host connections need the password (scram), so the
collector's password handling is exercised for real. ``fsync`` stays on: acknowledged
batches must be durable in the tests as in production.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

USER = "mplp"
PASSWORD = "test-password-not-secret"


def binaries() -> Path | None:
    """The newest PostgreSQL bin dir with initdb, or None."""
    override = os.environ.get("MPLP_PG_BIN")
    candidates = [Path(override)] if override else []
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        candidates += sorted(
            (p / "bin" for p in root.iterdir()), key=lambda p: _major(p.parent.name), reverse=True
        )
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).parent)
    return next((c for c in candidates if (c / "initdb").exists()), None)


def _major(name: str) -> int:
    return int(name) if name.isdigit() else 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    root: Path
    bin: Path
    port: int
    process: subprocess.Popen[bytes]
    as_user: list[str]
    args: list[str]  # the server's -c settings, to start it again on the same port

    @property
    def url(self) -> str:
        """A password-less URL: the password comes from PGPASSWORD, as the collector wants."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def url_for(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "PGPASSWORD": PASSWORD}

    def psql_url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.psql_url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.url_for(name)

    def halt(self) -> None:
        """Stop the server at once (``-m immediate``: no checkpoint, as a crash); the
        cluster's files stay, for :meth:`resume`."""
        self._pg_ctl("immediate")
        self.process.wait(timeout=60)

    def resume(self) -> None:
        """Start the server again on the same port and wait until it accepts connections."""
        self.process = _spawn(self.root, self.bin, self.as_user, self.args)
        wait_until_up(self)

    def _pg_ctl(self, mode: str) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.root / "data"),
             "-m", mode, "-w", "stop"],
            capture_output=True, check=False, timeout=60,
        )  # fmt: skip

    def stop(self) -> None:
        self._pg_ctl("fast")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def start(bin_dir: Path, *, settings: dict[str, str] | None = None) -> Cluster:
    root = Path(tempfile.mkdtemp(prefix="mplp-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "nobody", "--"]
        os.chown(root, 65534, 65534)
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if as_user:
        os.chown(pwfile, 65534, 65534)
    data = root / "data"
    subprocess.run(
        [
            *as_user,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-instructions",
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    port = _free_port()
    options = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": str(root),
        "max_connections": "100",
        "shared_buffers": "256MB",
        **(settings or {}),
    }
    args = [f"-c{name}={value}" for name, value in options.items()]
    cluster = Cluster(root, bin_dir, port, _spawn(root, bin_dir, as_user, args), as_user, args)
    try:
        wait_until_up(cluster)
    except RuntimeError:
        cluster.stop()
        raise
    return cluster


def _spawn(
    root: Path, bin_dir: Path, as_user: list[str], args: list[str]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*as_user, str(bin_dir / "postgres"), "-D", str(root / "data"), *args],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "server.log", "ab"),  # the server keeps it open
    )


def wait_until_up(cluster: Cluster) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if cluster.process.poll() is not None:
            log = (cluster.root / "server.log").read_text(errors="replace")
            raise RuntimeError(f"postgres exited: {log[-2000:]}")
        ready = subprocess.run(
            [str(cluster.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(cluster.port)],
            capture_output=True,
            check=False,
        )
        if ready.returncode == 0:
            return
        time.sleep(0.05)
    raise RuntimeError("postgres did not start within 60 s")

"""A throwaway PgBouncer (Debian's ``pgbouncer``) in transaction pooling mode in front of a
test cluster: what managed PostgreSQL services put before their databases.

It runs as ``nobody`` when the tests run as root (PgBouncer refuses root), listens on
127.0.0.1 with SCRAM authentication (the cluster's user and password), and shares few server
connections among its clients: consecutive transactions of one client run on different
server connections, so any session state a client keeps breaks.
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

from tests import postgres, processes

SERVER_CONNECTIONS = 4  # per database: fewer than the clients, so they share


def binary() -> Path | None:
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    return Path(found) if Path(found).exists() else None


@dataclass
class Bouncer:
    root: Path
    port: int
    process: subprocess.Popen[bytes]

    def url_for(self, database: str) -> str:
        return f"postgresql://{postgres.USER}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        return (self.root / "bouncer.log").read_text(errors="replace")

    def stop(self) -> None:
        processes.stop(self.process)
        shutil.rmtree(self.root, ignore_errors=True)


def start(program: Path, cluster: postgres.Cluster) -> Bouncer:
    root = Path(tempfile.mkdtemp(prefix="mplp-bouncer-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    (root / "users.txt").write_text(f'"{postgres.USER}" "{postgres.PASSWORD}"\n')
    (root / "bouncer.ini").write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={cluster.port}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = scram-sha-256\n"
        f"auth_file = {root / 'users.txt'}\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {SERVER_CONNECTIONS}\n"
        "max_client_conn = 500\n"
        f"logfile = {root / 'bouncer.log'}\n"
    )
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "nobody", "--"]
        for path in (root, root / "users.txt", root / "bouncer.ini"):
            os.chown(path, 65534, 65534)
    process = subprocess.Popen(
        [*as_user, str(program), str(root / "bouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bouncer = Bouncer(root, port, process)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = bouncer.log() if (root / "bouncer.log").exists() else ""
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"pgbouncer exited: {log[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return bouncer
        except OSError:
            time.sleep(0.05)
    bouncer.stop()
    raise RuntimeError("pgbouncer did not listen within 30 s")

"""The team collector under a write-token holder: bodies that inflate, forged stream writes.

* Eight concurrent gzip bodies of about 65 KiB that each inflate to 63 MiB (just under
  the 64 MiB the collectors used to accept) took the collector from 72 to 786 MiB. The
  peak resident size of a real collector process (its VmHWM), on PostgreSQL and on
  SQLite, stays under 200 MB while they arrive; each is refused (413 past the inflated
  cap, or 503 while the ingest slots are taken).
* A forged batch into another forwarder's stream (its source, seq 2^62 and a backlog of
  10^18 in the headers) is refused with 403 ``stream_key_mismatch``; the stream's seq,
  backlog and events stay what its own daemon, a real ``mplp-lsp watch``, sent.
"""

from __future__ import annotations

import gzip
import http.client
import json
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.collector import TOKEN as SQLITE_TOKEN
from tests.support.collector import Collector as SqliteCollector
from tests.support.waiting import wait_until
from tests.team.conftest import TOKEN, start_collector
from tests.team.conftest import pg_cluster as pg_cluster
from tests.team.conftest import pg_url as pg_url
from tests.ui.daemon import Watch, base_env

pytestmark = pytest.mark.e2e

BODIES = 8
INFLATED = 63 * 2**20
LIMIT_MB = 200


def bomb() -> bytes:
    """A batch's opening, then 63 MiB of blanks: about 64 KiB once gzipped."""
    return gzip.compress(b'{"source": "s", "items": [' + b" " * INFLATED, 9)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=120)
    try:
        connection.request("POST", "/events", body, {"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        return response.status, response.read()
    except (ConnectionError, http.client.HTTPException) as error:  # closed on us: refused too
        return 0, str(error).encode()
    finally:
        connection.close()


def peak_resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def send_bombs(url: str, token: str) -> list[int]:
    body = bomb()
    assert len(body) < 100 * 1024
    headers = {"Authorization": f"Bearer {token}", "Content-Encoding": "gzip"}
    statuses: list[int] = []
    threads = [
        threading.Thread(target=lambda: statuses.append(post(url, body, headers)[0]))
        for _ in range(BODIES)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return statuses


def test_concurrent_gzip_bodies_keep_the_team_collector_small(
    pg_url: str, pg_cluster: Any, tmp_path: Path
) -> None:
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    try:
        before = peak_resident_mb(collector.process.pid)
        statuses = send_bombs(collector.url, TOKEN)
        peak = peak_resident_mb(collector.process.pid)
        print(
            f"team collector peak RSS {before:.0f} MB before, {peak:.0f} MB after {BODIES} bodies"
        )
        assert peak < LIMIT_MB, (before, peak)
        assert len(statuses) == BODIES and set(statuses) <= {413, 503}, statuses
    finally:
        collector.stop()


def test_concurrent_gzip_bodies_keep_the_sqlite_collector_small(tmp_path: Path) -> None:
    collector = SqliteCollector(tmp_path / "collector.db")
    try:
        before = peak_resident_mb(collector.process.pid)
        statuses = send_bombs(collector.url, SQLITE_TOKEN)
        peak = peak_resident_mb(collector.process.pid)
        print(f"SQLite collector peak RSS {before:.0f} MB before, {peak:.0f} MB after")
        assert peak < LIMIT_MB, (before, peak)
        assert len(statuses) == BODIES and set(statuses) <= {413, 503}, statuses
    finally:
        collector.stop()


def get(url: str, path: str) -> Any:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=30)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def test_a_forged_write_into_another_forwarders_stream_is_refused(
    pg_url: str, pg_cluster: Any, tmp_path: Path
) -> None:
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {**base_env(tmp_path), "MPLP_LSP_REMOTE_TOKEN": TOKEN}
    watch = Watch.start(workspace, tmp_path / "state", env, "--remote", collector.url)
    try:
        for name in ("a.txt", "b.txt"):
            (workspace / name).write_text(f"{name}\n")
        wait_until(
            lambda: len(get(collector.url, "/events")["events"]) >= 2,
            what="both files at the collector",
        )
        [stream] = get(collector.url, "/streams")["streams"]
        honest = get(collector.url, "/events")["events"]
        envelope = {**honest[0]["envelope"], "event_id": str(uuid.uuid4())}
        forged = json.dumps(
            {"source": stream["stream"], "items": [{"seq": 2**62, "envelope": envelope}]}
        )
        for key in ({}, {"Mplp-Stream-Key": "guessed-" + uuid.uuid4().hex}):
            status, answer = post(
                collector.url,
                forged.encode(),
                {"Authorization": f"Bearer {TOKEN}", "Mplp-Backlog": str(10**18), **key},
            )
            assert status == 403, answer
            assert json.loads(answer)["error"] == "stream_key_mismatch"
        [after] = get(collector.url, "/streams")["streams"]  # the daemon may have sent more
        assert stream["last_seq"] <= after["last_seq"] < 2**62
        assert after["backlog"] != 10**18
        stored = get(collector.url, "/events")["events"]
        assert envelope["event_id"] not in {e["envelope"]["event_id"] for e in stored}
        # The stream's own daemon goes on writing it, with its key, after a restart too.
        watch.stop()
        watch = Watch.start(workspace, tmp_path / "state", env, "--remote", collector.url)
        (workspace / "c.txt").write_text("c\n")
        wait_until(
            lambda: get(collector.url, "/streams")["streams"][0]["last_seq"] > stream["last_seq"],
            what="the daemon's next event in its stream",
        )
    finally:
        watch.stop()
        collector.stop()

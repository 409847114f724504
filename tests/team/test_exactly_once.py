"""An event is stored once per team, by its event id, whichever stream or instance brings it.

A store salvaged with a damaged outbox sends everything again under a new stream
(docs/forwarding.md), a requeue or a re-sent batch may name another stream, and several
instances may receive copies at the same moment: each event must still be one row, on the
PostgreSQL collector as on the SQLite one, and the graph must not count it twice. Databases
made before this rule keep their first copy of each event and count the others as
duplicates of their streams.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mplp_lsp.collector.pg_schema import MIGRATIONS
from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.support.team import batch, count, envelope, get, post, stream_of
from tests.support.waiting import wait_until_async
from tests.team.conftest import TOKEN, Collector, start_collector

pytestmark = pytest.mark.e2e


async def test_one_envelope_under_two_streams_is_stored_once_on_postgresql(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    first = start_collector(pg_url, pg_cluster, tmp_path)
    second = start_collector(pg_url, pg_cluster, tmp_path)
    try:
        commit = envelope(Kind.GIT, "git", commit_id="c" * 40, event_kind="commit")
        edits = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"f{n}") for n in range(20)]
        sent = [commit, *edits]
        # The same events under two streams, at once through two instances, then again
        # under a third stream with other sequence numbers, one at a time.
        answers = await asyncio.gather(
            post(first.url, batch("old-stream", sent)),
            post(second.url, batch("new-stream", sent)),
        )
        assert [status for status, _ in answers] == [200, 200]
        assert sum(a["accepted"] for _, a in answers) == len(sent)
        assert sum(a["duplicates"] for _, a in answers) == len(sent)
        status, third = await post(first.url, batch("requeued", list(reversed(sent)), 500))
        assert (status, third) == (200, {"accepted": 0, "duplicates": len(sent)})
        assert count(pg_cluster, pg_url, "SELECT count(*) FROM events") == len(sent)
        ids = count(pg_cluster, pg_url, "SELECT count(DISTINCT event_id) FROM events")
        assert ids == len(sent)
        # The graph took each event once, from the stream that brought it first: one
        # commit, and the files of one stream only.
        assert count(pg_cluster, pg_url, "SELECT count(*) FROM team_commits") == 1
        paths = {e["payload"]["file_path"] for e in edits}
        paths |= {e["payload"]["previous_path"] for e in edits if e["payload"].get("previous_path")}
        assert count(pg_cluster, pg_url, "SELECT count(*) FROM team_files") == len(paths)
        assert count(pg_cluster, pg_url, "SELECT count(DISTINCT stream) FROM team_files") == 1
        _, stats = await get(first.url, "/stats")
        assert (stats["accepted"], stats["duplicates"]) == (len(sent), 2 * len(sent))
    finally:
        first.stop()
        second.stop()


async def test_a_batch_holding_an_event_twice_stores_it_once_and_folds_it_once(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    """An all-new batch is copied straight into the events; one the unique index refuses
    part of (an id twice in the batch, or stored before) goes the careful way, which
    keeps the first by sequence number and folds the graph from what it added."""
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    try:
        files = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"g{n}") for n in range(4)]
        twice = json.loads(json.dumps(files[0]))
        twice["payload"]["file_path"] = "renamed-in-the-copy"
        status, answer = await post(collector.url, batch("s", [*files[:2], twice, files[2]]))
        assert (status, answer) == (200, {"accepted": 3, "duplicates": 1})
        stored = count(
            pg_cluster,
            pg_url,
            "SELECT count(*) FROM events WHERE body LIKE '%renamed-in-the-copy%'",
        )
        assert stored == 0  # the first by sequence number is kept
        assert files_of(pg_cluster, pg_url) == paths_of(files[:3])
        status, answer = await post(collector.url, batch("s", files, 5))
        assert (status, answer) == (200, {"accepted": 1, "duplicates": 3})
        assert count(pg_cluster, pg_url, "SELECT count(*) FROM events") == 4
        assert files_of(pg_cluster, pg_url) == paths_of(files)
        assert count(pg_cluster, pg_url, "SELECT max(seq) FROM events") == 8
    finally:
        collector.stop()


def paths_of(edits: list[dict[str, Any]]) -> set[str]:
    """The graph's files of these file events: each path, and a rename's old path."""
    payloads = [e["payload"] for e in edits]
    return {p["file_path"] for p in payloads} | {
        p["previous_path"] for p in payloads if p.get("previous_path")
    }


def files_of(cluster: postgres.Cluster, db_url: str) -> set[str]:
    with psycopg.connect(cluster.psql_url(db_url.rsplit("/", 1)[1])) as conn:
        return {str(row[0]) for row in conn.execute("SELECT path FROM team_files")}


async def test_one_envelope_under_two_streams_is_stored_once_on_sqlite(tmp_path: Path) -> None:
    from tests.support.collector import TOKEN as SQLITE_TOKEN
    from tests.support.collector import Collector as SqliteCollector

    collector = SqliteCollector(tmp_path / "collector.db")
    auth = {"Authorization": f"Bearer {SQLITE_TOKEN}"}
    try:
        sent = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"f{n}") for n in range(5)]
        copy = json.loads(json.dumps(sent[0]))
        copy["source"] = "another-tool"  # the envelope's own source says nothing of its id
        assert (await post(collector.url, batch("old-stream", sent), **auth))[1]["accepted"] == 5
        status, again = await post(collector.url, batch("new-stream", [*sent, copy]), **auth)
        assert (status, again) == (200, {"accepted": 0, "duplicates": 6})
        assert len(collector.events()) == 5
    finally:
        collector.stop()


def garble_outbox(store: Path) -> None:
    """Overwrite the page holding the sinks' cursors (what each sink has been sent): the store
    fails its check at the next start, and the salvage, which cannot know what was sent,
    queues every event again (docs/forwarding.md: "the remote deduplicates, so re-sending is
    safe")."""
    conn = sqlite3.connect(store)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [
            page
            for (page,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'outbox_sinks' AND pagetype = 'leaf'"
            )
        ]
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    assert pages, "the store has no sinks' cursors to lose"
    with store.open("r+b") as handle:
        handle.seek((pages[0] - 1) * size)
        handle.write(random.Random(3).randbytes(size))


def local_events(state: Path) -> set[str]:
    conn = sqlite3.connect(state / "events.db")
    try:
        return {row[0] for row in conn.execute("SELECT event_id FROM events")}
    finally:
        conn.close()


async def test_a_salvaged_store_sends_everything_again_and_adds_no_row(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``watch`` daemon forwards to PostgreSQL, then queues while the collector is
    down; its store's outbox is damaged while it is stopped; the next daemon salvages the
    store and sends every event again under a new stream (the delivered ones too):
    PostgreSQL gains no row twice, and the old stream is shown as replaced by the new."""
    from tests.support.daemon import start_watch, stop, wait_for_api

    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    port = int(collector.url.rsplit(":", 1)[1])

    stored_at_last_look = -1

    async def delivered(not_from: str | None = None) -> bool:
        """The stream now sending (not ``not_from``) has sent every event of the store, and
        the store has stopped growing (a file's graph_update can follow its file event)."""
        nonlocal stored_at_last_look
        try:
            local = local_events(state)
            stream = stream_of(state)
        except sqlite3.DatabaseError:  # still damaged: the daemon salvages it first
            return False
        if stream is None or stream == not_from:
            return False  # not salvaged yet, or not forwarding yet
        _, answer = await get(collector.url, "/streams")
        mine = [s for s in answer["streams"] if s["stream"] == stream]
        sent = mine[0]["accepted"] + mine[0]["duplicates"] if mine else 0
        settled, stored_at_last_look = len(local) == stored_at_last_look, len(local)
        return settled and len(local) >= 100 and sent >= len(local)

    last = 0

    async def queued() -> bool:
        nonlocal last
        now = len(local_events(state))
        settled, last = now >= 3100 and now == last, now
        return settled

    try:
        daemon = await start_watch(workspace, state, "--remote", collector.url)
        try:
            await wait_for_api(state, workspace)
            for n in range(100):
                (workspace / f"sent{n:04d}.txt").write_text(f"{n}\n")
            await wait_until_async(delivered, timeout=180)
            collector.stop()  # what follows waits in the outbox
            for n in range(3000):
                (workspace / f"queued{n:04d}.txt").write_text(f"{n}\n")
            await wait_until_async(queued, timeout=180)
        finally:
            await stop(daemon)
        old_stream = stream_of(state)
        before = local_events(state)
        # What reached PostgreSQL before the collector stopped (an event stored just before the
        # stop may or may not have gone with its last batch): the daemon's own events, once each.
        delivered_before = {
            event_id
            for (event_id,) in pg_cluster_rows(pg_cluster, pg_url, "SELECT event_id FROM events")
        }
        assert len(delivered_before) >= 100 and delivered_before <= before
        assert count(pg_cluster, pg_url, "SELECT count(*) FROM events") == len(delivered_before)

        garble_outbox(state / "events.db")
        collector = start_collector(pg_url, pg_cluster, tmp_path, port=port)
        daemon = await start_watch(workspace, state, "--remote", collector.url)
        try:
            await wait_until_async(lambda: delivered(not_from=old_stream), timeout=180)
        finally:
            await stop(daemon)
        new_stream = stream_of(state)
        after = local_events(state)
        _, answer = await get(collector.url, "/streams")
    finally:
        collector.stop()
    rows = pg_cluster_rows(pg_cluster, pg_url, "SELECT event_id, count(*) FROM events GROUP BY 1")
    assert all(n == 1 for _, n in rows), "an event stored twice"
    assert {event_id for event_id, _ in rows} == after | before
    streams = {s["stream"]: s for s in answer["streams"]}
    resent = streams[new_stream]
    # Every salvaged event came again: the delivered ones are duplicates now.
    assert resent["duplicates"] >= len(delivered_before & after) >= 100
    assert resent["accepted"] == len(after) - len(delivered_before)
    assert streams[old_stream]["replaced_by"] == new_stream
    assert resent["replaced_by"] is None


def pg_cluster_rows(cluster: postgres.Cluster, db_url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(cluster.psql_url(db_url.rsplit("/", 1)[1])) as conn:
        return conn.execute(sql.encode()).fetchall()


async def test_duplicates_stored_before_the_rule_are_removed_by_the_migration(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    """A database at schema 2 holds one event under two streams (as a salvaged store's
    re-send left it): the upgrade keeps the first copy and moves the other's count from
    accepted to duplicates."""
    conninfo = pg_cluster.psql_url(pg_url.rsplit("/", 1)[1])
    shared, own = envelope(Kind.FILE_UPDATE, "file_update"), envelope(Kind.TOOL, "tool")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE collector_migrations (version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, script in enumerate(MIGRATIONS[:2], start=1):
            conn.execute(script.encode())
            conn.execute("INSERT INTO collector_migrations (version) VALUES (%s)", (version,))
        for stream, seq, one in (("old", 1, shared), ("old", 2, own), ("new", 1, shared)):
            conn.execute(
                "INSERT INTO events (stream, seq, source, event_id, kind, occurred_at, body)"
                " VALUES (%s, %s, 'test', %s, 'file_update', %s, %s)",
                (stream, seq, one["event_id"], one["timestamp"], json.dumps(one)),
            )
        conn.execute(
            "INSERT INTO streams VALUES ('old', now(), now(), 2, 1, 2, 0, NULL, NULL),"
            " ('new', now(), now(), 1, 1, 1, 0, NULL, NULL)"
        )
    collector: Collector = start_collector(pg_url, pg_cluster, tmp_path)
    try:
        _, answer = await get(collector.url, "/streams")
        status, again = await post(collector.url, batch("third", [shared]))
    finally:
        collector.stop()
    rows = pg_cluster_rows(pg_cluster, pg_url, "SELECT stream, event_id FROM events ORDER BY seq")
    assert sorted(rows) == sorted([("old", shared["event_id"]), ("old", own["event_id"])])
    counts = {s["stream"]: (s["accepted"], s["duplicates"]) for s in answer["streams"]}
    assert counts == {"old": (2, 0), "new": (0, 1)}
    assert (status, again) == (200, {"accepted": 0, "duplicates": 1})

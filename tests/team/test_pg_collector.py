"""The collector on a real PostgreSQL: start, migrations, ingest through several instances."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from mplp_lsp.collector.pg_schema import MIGRATIONS, migrate
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import default_validator
from tests import postgres
from tests.hostile.sessions import call, cookie_header, login_code
from tests.support.team import batch, count, envelope, get, instant, post
from tests.team.conftest import READ_TOKEN, TOKEN, Collector, start_collector
from tests.team.graph_dump import dump


def serve(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mplp_lsp", "collector", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "MPLP_LSP_COLLECTOR_TOKEN": TOKEN},
        check=False,
    )


def test_a_password_in_the_url_is_refused_in_one_line() -> None:
    done = serve("--db", "postgresql://team:s3cret@127.0.0.1:1/db", env=dict(os.environ))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "has a password in it" in lines[0], done.stderr
    assert "s3cret" not in done.stderr


def test_a_wrong_password_is_one_line(pg_cluster: postgres.Cluster) -> None:
    env = {**os.environ, "PGPASSWORD": "wrong"}
    done = serve("--db", pg_cluster.url, env=env)
    assert done.returncode == 1
    assert done.stderr.startswith("mplp-lsp collector: cannot use the PostgreSQL database")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


async def test_two_instances_migrating_at_once_apply_each_migration_once(
    pg_cluster: postgres.Cluster, pg_url: str
) -> None:
    async def one() -> int:
        async with await psycopg.AsyncConnection.connect(
            pg_url, password=postgres.PASSWORD, autocommit=True
        ) as conn:
            return await migrate(conn)

    versions = await asyncio.gather(*(one() for _ in range(4)))
    assert versions == [len(MIGRATIONS)] * 4
    assert count(pg_cluster, pg_url, "SELECT count(*) FROM collector_migrations") == len(MIGRATIONS)


@pytest.fixture
def two(pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path) -> Any:
    first = start_collector(pg_url, pg_cluster, tmp_path)
    second = start_collector(pg_url, pg_cluster, tmp_path)
    yield first, second
    first.stop()
    second.stop()


async def test_the_same_batch_through_two_instances_is_stored_once(
    pg_cluster: postgres.Cluster, pg_url: str, two: tuple[Collector, Collector]
) -> None:
    first, second = two
    envelopes = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"f{i}") for i in range(50)]
    body = batch("stream-a", envelopes)
    answers = await asyncio.gather(post(first.url, body), post(second.url, body))
    assert sorted(a[0] for a in answers) == [200, 200]
    assert sum(a[1]["accepted"] for a in answers) == 50
    assert sum(a[1]["duplicates"] for a in answers) == 50
    assert count(pg_cluster, pg_url, "SELECT count(*) FROM events") == 50
    # a retry through the other instance with the same key gets the first answer
    status, again = await post(second.url, body, **{"Idempotency-Key": "k1"})
    assert (status, again) == (200, {"accepted": 0, "duplicates": 50})
    status, replay = await post(first.url, body, **{"Idempotency-Key": "k1"})
    assert (status, replay) == (200, again)
    status, _ = await post(first.url, batch("stream-a", envelopes[:1]), **{"Idempotency-Key": "k1"})
    assert status == 422


async def test_a_stream_is_bound_to_its_first_key_across_instances(
    pg_cluster: postgres.Cluster, pg_url: str, two: tuple[Collector, Collector]
) -> None:
    first, second = two
    files = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"k{i}") for i in range(6)]
    # A stream from before keys: keyless batches are taken and bind nothing.
    assert (await post(first.url, batch("legacy", files[:1])))[0] == 200
    # Two forwarders claim one new stream at once, through two instances: one key wins.
    claims = await asyncio.gather(
        post(first.url, batch("new", files[1:2], 1), **{"Mplp-Stream-Key": "key-one"}),
        post(second.url, batch("new", files[2:3], 2), **{"Mplp-Stream-Key": "key-two"}),
    )
    assert sorted(status for status, _ in claims) == [200, 403]
    winner = "key-one" if claims[0][0] == 200 else "key-two"
    assert (await post(second.url, batch("new", files[3:4], 3), **{"Mplp-Stream-Key": winner}))[
        0
    ] == 200
    status, answer = await post(first.url, batch("new", files[4:5], 4))
    assert (status, answer["error"]) == (403, "stream_key_mismatch")
    # The legacy stream is bound by its forwarder's first keyed batch.
    assert (await post(first.url, batch("legacy", files[5:6], 2), **{"Mplp-Stream-Key": "k"}))[
        0
    ] == 200
    status, _ = await post(second.url, batch("legacy", files[:1], 3))
    assert status == 403
    assert count(pg_cluster, pg_url, "SELECT count(*) FROM stream_keys") == 2


def test_a_login_through_one_instance_holds_on_every_other(
    two: tuple[Collector, Collector],
) -> None:
    """A round-robin balancer: the code, the login page, the form and the pages each reach
    whichever instance; one-time values stay one-time across instances."""
    first, second = two
    code = login_code(first.url, READ_TOKEN)
    page = call("GET", f"{second.url}/ui/login")
    nonce = cookie_header(page.cookies)
    form = {"Cookie": nonce, "Sec-Fetch-Site": "same-origin"}
    posted = call("POST", f"{first.url}/ui/login", body={"code": code}, headers=form)
    assert posted.status == 200, posted.body
    session = cookie_header([c for c in posted.cookies if c.startswith("mplp_ui_team=")])
    assert session
    for url in (second.url, first.url):
        seen = call(
            "GET",
            f"{url}/ui/api/team?days=7",
            headers={"Cookie": session, "Sec-Fetch-Site": "same-origin"},
        )
        assert seen.status == 200, seen.body
    # The code and the nonce are spent everywhere: a replay through the other instance
    # (with a fresh nonce for the code, with a fresh code for the nonce) opens nothing.
    fresh_nonce = cookie_header(call("GET", f"{first.url}/ui/login").cookies)
    replays = (
        (code, fresh_nonce),
        (login_code(second.url, READ_TOKEN), nonce),
    )
    for replayed_code, replayed_nonce in replays:
        again = call(
            "POST",
            f"{second.url}/ui/login",
            body={"code": replayed_code},
            headers={**form, "Cookie": replayed_nonce},
        )
        assert again.status == 401, again.body
    forged = call(
        "GET",
        f"{second.url}/ui/api/team?days=7",
        headers={"Cookie": session[:-4] + "AAAA", "Sec-Fetch-Site": "same-origin"},
    )
    assert forged.status == 401


async def test_an_invalid_envelope_refuses_the_batch_and_stores_nothing(
    pg_cluster: postgres.Cluster, pg_url: str, two: tuple[Collector, Collector]
) -> None:
    good = envelope(Kind.GIT, "git")
    bad = envelope(Kind.GIT, "git")
    del bad["payload"]["repo_url"]
    status, answer = await post(two[0].url, batch("s", [good, bad]))
    assert status == 400 and answer["items"][0]["index"] == 1
    status, answer = await post(two[0].url, b'{"items": [NaN]}')
    assert status == 400 and answer["error"] == "invalid_json"
    assert count(pg_cluster, pg_url, "SELECT count(*) FROM events") == 0


async def test_tokens_read_only_tokens_and_health(two: tuple[Collector, Collector]) -> None:
    url = two[0].url
    assert (await get(url, "/events", token="nope"))[0] == 401
    assert (await get(url, "/events", token=READ_TOKEN))[0] == 200
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{url}/events", data=b"{}", headers={"Authorization": f"Bearer {READ_TOKEN}"}
        ) as r:
            assert r.status == 403
        async with session.get(f"{url}/health") as r:
            assert r.status == 200
    status, document = await get(url, "/openapi.json", token=READ_TOKEN)
    assert status == 200 and "/events" in document["paths"]


async def test_event_pages_end_and_filter(two: tuple[Collector, Collector]) -> None:
    url = two[0].url
    files = [envelope(Kind.FILE_UPDATE, "file_update", file_path=f"f{i}") for i in range(25)]
    commits = [envelope(Kind.GIT, "git", commit_id=f"{i:040x}") for i in range(5)]
    assert (await post(url, batch("s1", files)))[0] == 200
    assert (await post(url, batch("s2", commits)))[0] == 200
    seen: list[int] = []
    after = "0.0"
    for _ in range(10):
        status, page = await get(url, f"/events?limit=10&after={after}")
        assert status == 200
        seen += [e["id"] for e in page["events"]]
        if "next" not in page:
            break
        after = page["next"]
    assert len(seen) == 30 and seen == sorted(set(seen))
    _, page = await get(url, "/events?kind=git&limit=100")
    assert [e["envelope"]["event_id"] for e in page["events"]] == [c["event_id"] for c in commits]
    assert "next" not in page
    _, page = await get(url, "/events?stream=s1&limit=100")
    assert len(page["events"]) == 25
    repo = commits[0]["payload"]["repo_url"]
    _, page = await get(url, f"/events?repository={repo}&limit=100")
    assert len(page["events"]) == 5
    author = page["events"][0]["author"]
    assert author and "@" not in author
    _, page = await get(url, f"/events?author={author}&limit=100")
    assert len(page["events"]) == 5
    _, page = await get(url, "/events?since=2999-01-01T00:00:00Z")
    assert page["events"] == []
    assert (await get(url, "/events?after=x"))[0] == 400
    _, streams = await get(url, "/streams")
    assert {s["stream"] for s in streams["streams"]} == {"s1", "s2"}
    assert next(s for s in streams["streams"] if s["stream"] == "s2")["repositories"] == [repo]


async def test_repository_graph_pipelines_and_retention(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    repo = "https://git.example.org/team/app.git"
    old = "2020-01-01T00:00:00.000Z"
    root = envelope(Kind.GIT, "git", commit_id="a" * 40, parent_commits=[], event_kind="commit")
    child = envelope(
        Kind.GIT,
        "git",
        commit_id="b" * 40,
        parent_commits=["a" * 40],
        event_kind="commit",
        timestamp="2026-03-02T09:00:00Z",  # after the root: the branch's head
    )
    root["timestamp"] = old
    edit = envelope(Kind.FILE_UPDATE, "file_update", change_type="modified", previous_path=None)
    del edit["payload"]["previous_path"]
    started = envelope(Kind.CI, "ci")
    done = envelope(
        Kind.CI, "ci", status="succeeded", completed_at="2026-03-02T08:05:30Z", duration_ms=150000
    )
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    try:
        url = collector.url
        body = batch("ws", [done, root, edit, child, started])
        assert (await post(url, body, **{"Idempotency-Key": "old-key"}))[0] == 200
        status, graph = await get(url, f"/repository?repo_url={repo}", token=READ_TOKEN)
        assert status == 200
        assert [b["ref_name"] for b in graph["branches"]] == ["refs/heads/main"]
        assert graph["branches"][0]["head_commit"] == "b" * 40
        by_id = {c["commit_id"]: c for c in graph["commits"]}
        assert by_id["b" * 40]["parents"] == ["a" * 40]
        assert by_id["b" * 40]["branches"] == ["refs/heads/main"]
        assert "@" not in by_id["b" * 40]["author"]
        assert [(f["path"], f["modified_by"]) for f in graph["files"]] == [("src/app.py", "ws")]
        assert (await get(url, "/repository?repo_url=nope"))[0] == 404
        _, listed = await get(url, "/repositories")
        assert [(r["repo_url"], r["first_seen"]) for r in listed["repositories"]] == [
            (repo, "2026-03-02T07:02:00Z")  # the root's commit time (+01:00), in UTC
        ]
        _, runs = await get(url, "/pipelines")
        [run] = runs["runs"]
        assert (run["status"], run["duration_ms"]) == ("succeeded", 150000)
        assert [s["stage_name"] for s in run["stages"]] == ["lint", "test", "deploy"]
        _, stats = await get(url, "/stats")
        assert stats["accepted"] == 5
    finally:
        collector.stop()
    with psycopg.connect(pg_cluster.psql_url(pg_url.rsplit("/", 1)[1])) as conn:
        emitted = [json.loads(b) for (b,) in conn.execute("SELECT body FROM team_emitted")]
    validator = default_validator()
    for event in emitted:  # as the local runtime emits them: valid spec events
        assert validator.validate(Kind(event["event_family"]), event).ok, event
    stages = [e for e in emitted if e["event_family"] == "pipeline_stage"]
    assert [e["stage_status"] for e in stages] == ["completed"]  # the run's one change
    assert any(e["event_family"] == "graph_update" for e in emitted)
    before = dump(pg_cluster.psql_url(pg_url.rsplit("/", 1)[1]))
    with psycopg.connect(pg_cluster.psql_url(pg_url.rsplit("/", 1)[1])) as conn:
        conn.execute("UPDATE idempotency SET at = '2020-01-01T00:00:00Z'")  # answered long ago
        # Received long ago; the root only happened long ago (a clock days behind): by
        # receive time, it stays as long as everything else received with it.
        conn.execute(
            "UPDATE events SET received_at = '2020-01-01Z' WHERE event_id = %s", (done["event_id"],)
        )
    collector = start_collector(pg_url, pg_cluster, tmp_path, "--retention-days", "30")
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            _, page = await get(collector.url, "/events")
            ids = [e["event_id"] for e in page["events"]]
            if done["event_id"] not in ids or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)
        assert done["event_id"] not in ids and len(ids) == 4
        assert root["event_id"] in ids
        assert count(pg_cluster, pg_url, "SELECT count(*) FROM idempotency") == 0
    finally:
        collector.stop()
    assert dump(pg_cluster.psql_url(pg_url.rsplit("/", 1)[1])) == before  # the graph stays


async def test_values_with_copy_escapes_are_stored_as_sent(
    pg_cluster: postgres.Cluster, pg_url: str, tmp_path: Path
) -> None:
    """Rows travel as COPY text: a backslash, tab, newline or a literal \\N in a value or a
    body comes back exactly."""
    streams = ["\\N", "tab\there", "line\r\nbreak\\", "plain"]
    sent = [
        envelope(Kind.FILE_UPDATE, "file_update", file_path=f'a\\b\t"{n}"\n\\N')
        for n in range(len(streams))
    ]
    collector = start_collector(pg_url, pg_cluster, tmp_path)
    try:
        for stream, one in zip(streams, sent, strict=True):
            assert (await post(collector.url, batch(stream, [one])))[0] == 200
        _, page = await get(collector.url, "/events")
    finally:
        collector.stop()
    assert [(e["stream"], e["envelope"]) for e in page["events"]] == list(
        zip(streams, sent, strict=True)
    )
    for event, one in zip(page["events"], sent, strict=True):
        assert instant(event["occurred_at"]) == instant(one["timestamp"])
        assert instant(event["received_at"]).tzinfo is not None
        assert (event["kind"], event["author"], event["source"]) == (
            "file_update",
            None,
            one["source"],
        )

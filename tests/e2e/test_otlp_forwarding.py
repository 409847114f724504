"""Forwarding to an OTLP/HTTP receiver on 127.0.0.1 (decoded with the official
opentelemetry-proto messages), alone and beside the collector; and the upgrade of a store
the previous release wrote, whose queue still reaches its remote."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.engine.intake import Submission
from mplp_lsp.protocol.kinds import Kind
from tests.e2e.harness import Watch, read_events, watching
from tests.gitrepo import Repo
from tests.support.collector import TOKEN, Collector, free_port
from tests.support.daemon import mplp
from tests.support.forwarding import open_workspace, submissions
from tests.support.otlp import Receiver, Record, receiving_in_a_thread
from tests.support.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "schema17-forwarding.db.gz"
COMMIT = "0c1f7d2e9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d"
OUTAGE_S = 20.0


@pytest.fixture(autouse=True)
def remote_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLP_LSP_REMOTE_TOKEN", TOKEN)


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    running = Collector(tmp_path / "collector.db")
    yield running
    running.stop()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    running = await Receiver().start()
    yield running
    await running.stop()


def activity() -> list[Submission]:
    """A save, a commit, a tool run and a CI run, as the editor, the hooks, ``run`` and
    ``emit ci`` submit them."""
    return [
        Submission(
            Kind.FILE_UPDATE,
            {
                "file_path": "src/app.py",
                "change_type": "modified",
                "timestamp": "2026-03-02T08:01:00.000Z",
                "lines_added": 3,
            },
            "ide",
        ),
        Submission(
            Kind.GIT,
            {
                "repo_url": "https://git.example.org/team/app.git",
                "commit_id": COMMIT,
                "ref_name": "refs/heads/main",
                "event_kind": "commit",
                "timestamp": "2026-03-02T08:02:00+01:00",
            },
            "git",
        ),
        Submission(
            Kind.TOOL,
            {
                "tool_id": "ruff",
                "tool_kind": "linter",
                "invocation_id": "3f1c2a4e-8b7d-4c2e-9a1f-0d5e6b7c8a90",
                "status": "failed",
                "started_at": "2026-03-02T08:00:00.000Z",
                "completed_at": "2026-03-02T08:00:01.250Z",
                "exit_code": 1,
            },
            "tool",
        ),
        Submission(
            Kind.CI,
            {
                "ci_provider": "gitlab-ci",
                "pipeline_id": "build",
                "run_id": "4711",
                "status": "succeeded",
                "started_at": "2026-03-02T08:03:00Z",
                "branch_name": "main",
                "commit_id": COMMIT,
                "run_url": "https://ci.example.org/team/app/-/pipelines/4711",
            },
            "ci",
        ),
    ]


def by_type(records: list[Record]) -> dict[str, Record]:
    return {record.envelope["event_type"]: record for record in records}


@pytest.mark.parametrize(("encoding", "compression"), [("json", "gzip"), ("protobuf", "none")])
async def test_activity_arrives_as_log_records_with_the_mapped_attributes(
    tmp_path: Path, receiver: Receiver, encoding: str, compression: str
) -> None:
    workspace = await open_workspace(
        tmp_path / "ws",
        tmp_path / "state",
        None,
        otlpEndpoint=receiver.url,
        otlpEncoding=encoding,
        otlpCompression=compression,
    )
    try:
        results = await workspace.intake.submit_many(activity())
        accepted = [result.event.event_id for result in results if result.event is not None]
        assert len(accepted) == 4

        def arrived() -> bool:
            return set(accepted) <= set(receiver.event_ids())

        await wait_until_async(arrived, timeout=30, what="four log records")
    finally:
        await workspace.close()
    assert receiver.content_types == {
        "application/json" if encoding == "json" else "application/x-protobuf"
    }
    assert receiver.encodings == {"gzip" if compression == "gzip" else "identity"}
    records = by_type([r for r in receiver.records if r.envelope["event_id"] in accepted])
    save, commit = records["file_update"], records["git_operation"]
    tool, ci = records["tool_execution"], records["ci_pipeline"]
    assert save.attributes["code.file.path"] == "src/app.py"
    assert save.event_name == "mplp.file_update" == save.attributes["event.name"]
    # The event's own time: 08:02+01:00 is 07:02 UTC.
    assert commit.time_unix_nano == 1772434920 * 10**9
    assert {k: v for k, v in commit.attributes.items() if k.startswith("vcs.")} == {
        "vcs.repository.url.full": "https://git.example.org/team/app.git",
        "vcs.ref.head.name": "main",
        "vcs.ref.head.type": "branch",
        "vcs.ref.head.revision": COMMIT,
    }
    assert tool.attributes["process.exit.code"] == 1
    assert tool.time_unix_nano == 1772438401250 * 10**6  # completed_at
    assert {k: v for k, v in ci.attributes.items() if k.startswith("cicd.")} == {
        "cicd.pipeline.name": "build",
        "cicd.pipeline.run.id": "4711",
        "cicd.pipeline.run.url.full": "https://ci.example.org/team/app/-/pipelines/4711",
        "cicd.pipeline.result": "success",
    }
    resource = save.resource
    assert resource["service.name"] == "mplp-lsp" and resource["service.version"]
    assert resource["service.instance.id"] and resource["mplp.workspace.origin"]
    assert "host.name" not in resource  # only when otlpSendHostName allows it
    received = receiver.event_ids()
    assert len(received) == len(set(received))  # each once
    assert [event_id for event_id in received if event_id in accepted] == accepted


async def test_partial_success_503_and_an_outage_lose_nothing_and_duplicate_nothing(
    tmp_path: Path,
) -> None:
    # Request 1: one record of its batch rejected; 2: 503 with Retry-After; 3: a batch of
    # one rejected whole; then down for a while, then up again.
    def respond(number: int, records: list[Record]) -> tuple[int, dict[str, str], int]:
        if number == 1:
            return 200, {}, 1
        if number == 2:
            return 503, {"Retry-After": "1"}, 0
        if number == 3 and len(records) == 1:
            return 200, {}, 1
        return 200, {}, 0

    receiver = await Receiver(respond).start()
    port = int(receiver.url.rsplit(":", 1)[1])
    workspace = await open_workspace(
        tmp_path / "ws",
        tmp_path / "state",
        None,
        otlpEndpoint=receiver.url,
        forwardBatchSize=5,
    )
    try:
        first = await workspace.intake.submit_many(submissions(5))
        await wait_until_async(lambda: receiver.requests >= 1, timeout=30, what="batch 1")
        second = await workspace.intake.submit_many(submissions(1, first=5))
        await wait_until_async(lambda: receiver.requests >= 3, timeout=30, what="503")
        await receiver.stop()  # the receiver is down for 20 s; saves go on meanwhile
        before_outage = receiver
        third = []
        for wave in range(4):
            third += await workspace.intake.submit_many(submissions(2, first=6 + 2 * wave))
            await asyncio.sleep(OUTAGE_S / 4)
        sink = ((await workspace.status()).forward or {})["sinks"]["otlp"]
        assert sink["failed_attempts"] >= 2 and sink["depth"] >= 8  # tried, kept
        receiver = await Receiver().start(port)  # back

        async def drained() -> bool:
            sink = ((await workspace.status()).forward or {})["sinks"]["otlp"]
            return bool(sink["depth"] == 0)

        await wait_until_async(drained, timeout=60, what="the backlog drained")
        status = (await workspace.status()).forward or {}
    finally:
        await workspace.close()
        await receiver.stop()
    otlp = status["sinks"]["otlp"]
    accepted = [r.event.event_id for r in [*first, *second, *third] if r.event is not None]
    assert len(accepted) == 14
    received = [*before_outage.event_ids(), *receiver.event_ids()]
    rejected = [r.envelope["event_id"] for r in [*before_outage.rejected, *receiver.rejected]]
    assert len(received) == len(set(received))  # nothing twice
    # Every envelope arrived, or the receiver said it rejected it: nothing lost on the way.
    assert set(accepted) <= set(received) | set(rejected)
    # Rejected in part: acknowledged and counted; rejected whole: a dead letter.
    assert otlp["rejected"] + otlp["dead_letters"] == len(rejected) >= 1
    assert otlp["failed_attempts"] >= 3  # the 503 and the outage


async def test_the_collector_and_an_otlp_receiver_each_get_every_envelope_once(
    tmp_path: Path, collector: Collector, receiver: Receiver
) -> None:
    workspace = await open_workspace(
        tmp_path / "ws", tmp_path / "state", collector.url, otlpEndpoint=receiver.url
    )
    try:
        results = await workspace.intake.submit_many([*submissions(300), *activity()])
        accepted = {r.event.event_id for r in results if r.event is not None}

        async def both() -> bool:
            sinks = ((await workspace.status()).forward or {})["sinks"]
            return all(sinks[name]["depth"] == 0 for name in ("collector", "otlp"))

        await wait_until_async(both, timeout=60, what="both sinks drained")
    finally:
        await workspace.close()
    received = receiver.event_ids()
    assert len(received) == len(set(received))
    stored = [event["envelope"]["event_id"] for event in collector.events()]
    assert sorted(received) == sorted(stored)  # the same envelopes, each once at each
    assert accepted <= set(received)


async def test_an_old_stores_queue_reaches_its_remote_after_the_upgrade(
    tmp_path: Path, collector: Collector
) -> None:
    """The fixture was written by the previous release (schema 17): 15 envelopes queued for
    a remote, 5 held for another, 2 dead letters. Its queue's remote is named as the
    collector's URL here (the fixture's port cannot be this run's)."""
    state = tmp_path / "state"
    state.mkdir()
    with gzip.open(FIXTURE) as packed, (state / "events.db").open("wb") as out:
        shutil.copyfileobj(packed, out)
    conn = sqlite3.connect(state / "events.db")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'forward.remote'", (collector.url,))
    queued = [seq for (seq,) in conn.execute("SELECT seq FROM outbox ORDER BY seq")]
    conn.commit()
    conn.close()
    assert len(queued) == 15
    workspace = await open_workspace(tmp_path / "ws", state, collector.url)
    try:

        async def drained() -> bool:
            return bool(((await workspace.status()).forward or {})["depth"] == 0)

        await wait_until_async(drained, timeout=30, what="the old queue sent")
        forward = (await workspace.status()).forward or {}
    finally:
        await workspace.close()
    seqs = {event["seq"] for event in collector.events()}
    assert set(queued) <= seqs  # every pending row of the old queue
    assert seqs.isdisjoint({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})  # held, delivered, dead: not sent
    assert forward["dead_letters"] == 2 and forward["held"] == {"http://127.0.0.1:7001": 5}
    assert forward["delivered"] >= 3 + 15  # the old counter kept, the old queue added


# -- real processes: a watch daemon, the CLI, git ----------------------------------------------

INTEGRATION = {"file_update", "git_operation", "tool_execution", "ci_pipeline"}
CI_RUN = ("--provider", "local", "--pipeline-id", "build", "--run-id", "7", "--status", "succeeded")
FAST_SET = ("--set", "forwardRetryInitialMs=5", "--set", "forwardRetryMaxMs=100")


def _status(repo: Repo, state: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = mplp(repo.path, "status", "--json", "--state-dir", str(state), **(env or {}))
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)["forward"])


def _stored_ids(state: Path) -> set[str]:
    return {event["event_id"] for event in read_events(state)}


KILLS = 3


def _burst_then_kill_9(repo: Repo, receiver: Receiver, watch: Watch, run: int) -> None:
    """300 saves while both sinks forward, and SIGKILL once some are on the wire."""
    for n in range(300):
        repo.write(f"burst{run}/f{n}.py", f"N = {n}\n")

    def on_the_wire() -> bool:
        paths = {str(r.attributes.get("code.file.path", "")) for r in receiver.records}
        return any(path.startswith(f"burst{run}/") for path in paths)

    wait_until(on_the_wire, timeout=60, what=f"burst {run} being forwarded")
    watch.process.send_signal(signal.SIGKILL)
    watch.process.wait(30)


def test_a_daemon_forwards_saves_a_commit_a_run_and_emit_ci_to_both_and_survives_kill_9(
    tmp_path: Path, collector: Collector
) -> None:
    repo = Repo.existing(tmp_path / "ws")
    state = tmp_path / "state"
    with receiving_in_a_thread() as receiver:
        env = {"MPLP_LSP_OTLP_ENDPOINT": receiver.url, "MPLP_LSP_REMOTE_TOKEN": TOKEN}
        flags = ("--remote", collector.url, *FAST_SET)
        with watching(repo.path, state, *flags, env=env, api=True) as watch:
            repo.write("src/new_module.py", "VALUE = 1\n")  # a save
            repo.git("add", "--", "src/new_module.py")
            repo.git("commit", "-q", "-m", "Add a module")  # a commit
            done = mplp(
                repo.path, "run", "--state-dir", str(state), "--", sys.executable, "-c", "0"
            )
            assert done.returncode == 0, done.stderr
            done = mplp(repo.path, "emit", "ci", *CI_RUN, "--state-dir", str(state))
            assert done.returncode == 0, done.stderr

            def every_kind_arrived() -> bool:
                return {r.envelope["event_type"] for r in receiver.records} >= INTEGRATION

            wait_until(every_kind_arrived, timeout=60, what="each kind as a log record")
            _burst_then_kill_9(repo, receiver, watch, 0)
        for run in range(1, KILLS):  # again, the daemon restarted on what the last one left
            with watching(repo.path, state, *flags, env=env, api=True) as watch:
                _burst_then_kill_9(repo, receiver, watch, run)
        with watching(repo.path, state, *flags, env=env, api=True):

            def both_drained() -> bool:
                forward = _status(repo, state)
                return all(forward["sinks"][name]["depth"] == 0 for name in ("collector", "otlp"))

            wait_until(both_drained, timeout=120, what="both sinks drained after the kill")
        records = list(receiver.records)
    stored = _stored_ids(state)
    at_collector = {event["envelope"]["event_id"] for event in collector.events()}
    at_receiver = {record.envelope["event_id"] for record in records}
    assert stored <= at_collector and stored <= at_receiver  # nothing lost at either
    by_kind = {r.envelope["event_type"]: r for r in records}
    commit = by_kind["git_operation"]
    assert commit.attributes["vcs.ref.head.name"] == "main"
    assert commit.attributes["vcs.ref.head.revision"] == repo.git("rev-parse", "HEAD").strip()
    assert by_kind["tool_execution"].attributes["process.exit.code"] == 0
    assert by_kind["ci_pipeline"].attributes["cicd.pipeline.result"] == "success"
    saves = [r for r in records if r.envelope["event_type"] == "file_update"]
    assert "src/new_module.py" in {r.attributes["code.file.path"] for r in saves}


async def test_a_remotes_list_adds_named_sinks_each_with_its_own_dead_letters(
    tmp_path: Path, receiver: Receiver
) -> None:
    refusing = await Receiver(status=403).start()
    remotes = [
        {"kind": "otlp", "url": refusing.url, "name": "vendor", "options": {"encoding": "protobuf"}}
    ]
    state = tmp_path / "state"
    (tmp_path / "ws").mkdir()
    workspace = await open_workspace(
        tmp_path / "ws", state, None, otlpEndpoint=receiver.url, remotes=remotes
    )
    try:
        results = await workspace.intake.submit_many(activity())
        accepted = {r.event.event_id for r in results if r.event is not None}

        async def settled() -> bool:
            sinks = ((await workspace.status()).forward or {})["sinks"]
            return bool(sinks["otlp"]["depth"] == 0 == sinks["vendor"]["depth"])

        await wait_until_async(settled, timeout=60, what="both sinks settled")
        sinks = ((await workspace.status()).forward or {})["sinks"]
    finally:
        await workspace.close()
    assert accepted <= set(receiver.event_ids())
    assert refusing.content_types == {"application/x-protobuf"}  # the entry's own option
    assert sinks["vendor"]["dead_letters"] >= len(accepted) and sinks["otlp"]["dead_letters"] == 0
    where = ("--state-dir", str(state), "--workspace", str(tmp_path / "ws"))
    done = mplp(tmp_path, "outbox", "dead", "--json", "--sink", "vendor", *where)
    assert done.returncode == 0, done.stderr
    letters = [json.loads(line) for line in done.stdout.splitlines()]
    assert {letter["sink"] for letter in letters} == {"vendor"}
    assert accepted <= {letter["event_id"] for letter in letters}
    assert all(letter["status"] == 403 for letter in letters)
    done = mplp(tmp_path, "outbox", "dead", "--json", "--sink", "otlp", *where)
    assert (done.returncode, done.stdout) == (0, "")

    # Requeued for the vendor sink alone: the vendor gets them once, the otlp sink not again.
    done = mplp(tmp_path, "outbox", "requeue", "--sink", "vendor", "--all", *where)
    assert done.returncode == 0 and done.stdout == f"requeued {len(letters)} dead letters\n"
    refusing.status = 200
    sent_to_otlp = len(receiver.records)
    workspace = await open_workspace(
        tmp_path / "ws", state, None, otlpEndpoint=receiver.url, remotes=remotes
    )
    try:
        await wait_until_async(
            lambda: {letter["event_id"] for letter in letters} <= set(refusing.event_ids()),
            timeout=60,
            what="the requeued letters at the vendor",
        )
    finally:
        await workspace.close()
        await refusing.stop()
    at_vendor = refusing.event_ids()
    assert all(at_vendor.count(letter["event_id"]) == 1 for letter in letters)
    assert not {r.envelope["event_id"] for r in receiver.records[sent_to_otlp:]} & accepted


def test_otlp_endpoint_changed_under_a_running_daemon_holds_the_old_queue_for_it(
    tmp_path: Path,
) -> None:
    """The settings file names receiver A (down), then B: what was queued for A is held
    for A, B gets what comes after; requeued with ``--held --sink otlp``, B gets A's too,
    each once. Status shows the text block of the otlp sink."""
    repo = Repo.create(tmp_path / "ws")
    state, xdg = tmp_path / "state", tmp_path / "xdg"
    (xdg / "mplp-lsp").mkdir(parents=True)
    config = xdg / "mplp-lsp" / "config.toml"
    a_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config.write_text(f'otlpEndpoint = "{a_url}"\n')
    env = {"XDG_CONFIG_HOME": str(xdg)}
    with receiving_in_a_thread() as b, watching(repo.path, state, *FAST_SET, env=env, api=True):
        for n in range(3):
            repo.write(f"src/a{n}.py", f"A = {n}\n")

        def otlp() -> dict[str, Any]:
            return dict(_status(repo, state, env)["sinks"]["otlp"])

        wait_until(lambda: otlp()["failed_attempts"] > 0 and otlp()["depth"] >= 3, timeout=60)
        for_a = {e["event_id"] for e in read_events(state)}
        config.write_text(f'otlpEndpoint = "{b.url}"\n')  # the daemon keeps running
        wait_until(lambda: otlp()["remote"] == b.url, timeout=30, what="the change applied")
        repo.write("src/b.py", "B = 1\n")
        wait_until(
            lambda: "src/b.py" in {r.attributes.get("code.file.path") for r in b.records},
            timeout=60,
            what="B's own record",
        )
        assert not for_a & set(b.event_ids()), "B was sent what was queued for A"
        held = _status(repo, state, env)["held"]
        assert held.get(f"{a_url}/v1/logs", 0) >= len(for_a), held
        text = mplp(repo.path, "status", "--state-dir", str(state), **env).stdout
        assert "forwarding to otlp " in text and f"(remote {b.url})" in text, text
        assert "forwarding to collector off" in text, text  # no collector: its block says so
        done = mplp(
            repo.path, "outbox", "requeue", "--held", "--sink", "otlp",
            "--state-dir", str(state), **env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        wait_until(lambda: for_a <= set(b.event_ids()), timeout=60, what="A's queue sent to B")
        received = b.event_ids()
    assert all(received.count(event_id) == 1 for event_id in for_a)

"""The one intake, with a real store on disk: sanitise, validate, dedup, commit, publish."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from mplp_lsp.engine.intake import Outcome, Submission
from mplp_lsp.protocol.envelope import FamilyForm, build_envelope, new_id
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.protocol.validator import validate
from tests.conftest import sample
from tests.support.stores import Rig
from tests.support.stores import rig as rig  # the fixture

CANARY = "ghp_" + "Zq8xT2mW9vR4kL7pN3bY6cF1hJ5sD0aE8gU2"


async def test_accepted_payload_is_stored_in_a_valid_envelope_and_published(rig: Rig) -> None:
    [result] = await rig.intake.submit_many([Submission(Kind.CI, sample("ci"), "ci")])
    assert result.outcome is Outcome.ACCEPTED and result.event is not None
    [stored] = await rig.stored()
    assert stored.envelope == result.event.envelope
    assert stored.envelope["event_family"] == "ExternalIntegrationEvent"
    assert stored.envelope["event_type"] == "ci_pipeline"
    assert stored.envelope["source_module"] == "ci"
    assert validate(Kind.ENVELOPE, stored.envelope).ok
    await rig.bus.drain()
    assert [e.event_id for e in rig.published] == [stored.event_id]


async def test_the_same_event_twice_is_stored_once(rig: Rig) -> None:
    first = await rig.intake.submit(Submission(Kind.TOOL, sample("tool"), "cli"))
    second = await rig.intake.submit(Submission(Kind.TOOL, sample("tool"), "cli"))
    assert (first.outcome, second.outcome) == (Outcome.ACCEPTED, Outcome.DUPLICATE)
    assert len(await rig.stored()) == 1
    assert rig.intake.counters.duplicates == 1


async def test_rejected_input_goes_to_the_error_log_and_a_counter_not_the_event_log(
    rig: Rig,
) -> None:
    bad = sample("git") | {"event_kind": "rebase", "commit_message": f"token {CANARY}"}
    result = await rig.intake.submit(Submission(Kind.GIT, bad, "git"))
    assert result.outcome is Outcome.REJECTED
    assert [(e.path, e.code) for e in result.result.errors] == [("event_kind", "enum")]
    assert await rig.stored() == []
    assert (await rig.counters())["rejected"] == 1
    [record] = rig.log.read()
    assert record["errors"] == [e.to_dict() for e in result.result.errors]
    assert CANARY not in json.dumps(record)
    await rig.bus.drain()
    assert rig.published == []


async def test_free_text_is_redacted_and_urls_lose_credentials(rig: Rig) -> None:
    git = sample("git") | {
        "commit_message": f"fix: rotate {CANARY}",
        "repo_url": "https://bob:hunter2secret@git.example.org/r.git",
    }
    tool = sample("tool") | {
        "args": ["--token", CANARY, "src"],
        "output_summary": f"leaked {CANARY}",
    }
    results = await rig.intake.submit_many(
        [Submission(Kind.GIT, git, "git"), Submission(Kind.TOOL, tool, "cli")]
    )
    assert all(r.accepted for r in results)
    text = json.dumps([e.envelope for e in await rig.stored()])
    assert CANARY not in text and "hunter2secret" not in text
    stored_git = (await rig.stored())[0].envelope["payload"]
    assert stored_git["repo_url"] == "https://git.example.org/r.git"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("../outside.py", "path_traversal"),
        ("/etc/passwd", "path_outside_workspace"),
        ("a\x00b", "path_control_character"),
    ],
)
async def test_untrusted_paths_are_checked(rig: Rig, path: str, code: str) -> None:
    result = await rig.intake.submit(
        Submission(Kind.FILE_UPDATE, sample("file_update") | {"file_path": path}, "http")
    )
    assert result.outcome is Outcome.REJECTED
    assert [(e.path, e.code) for e in result.result.errors] == [("file_path", code)]


async def test_absolute_path_inside_the_workspace_becomes_relative(rig: Rig) -> None:
    payload = sample("file_update") | {
        "file_path": str(rig.root / "src" / "x.py"),
        "previous_path": "src/old.py",
    }
    result = await rig.intake.submit(Submission(Kind.FILE_UPDATE, payload, "http"))
    assert result.event is not None
    assert result.event.envelope["payload"]["file_path"] == "src/x.py"


async def test_symlink_out_of_the_workspace_is_refused(rig: Rig, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("x")
    (rig.root / "link").symlink_to(tmp_path / "secret")
    result = await rig.intake.submit(
        Submission(Kind.FILE_UPDATE, sample("file_update") | {"file_path": "link"}, "http")
    )
    assert [(e.path, e.code) for e in result.result.errors] == [
        ("file_path", "path_symlink_escape")
    ]


async def test_envelopes_keep_their_id_and_are_checked(rig: Rig) -> None:
    envelope = build_envelope(
        Kind.GIT, sample("git"), source_module="hook", family=FamilyForm.UPSTREAM
    )
    accepted = await rig.intake.submit(Submission(Kind.ENVELOPE, envelope, "http"))
    assert accepted.event is not None and accepted.event.event_id == envelope["event_id"]
    assert accepted.event.kind == "git"
    again = await rig.intake.submit(
        Submission(Kind.ENVELOPE, envelope | {"event_id": new_id()}, "http")
    )
    assert again.outcome is Outcome.DUPLICATE  # same payload: the same event
    broken = await rig.intake.submit(
        Submission(Kind.ENVELOPE, envelope | {"event_type": "nope"}, "http")
    )
    assert broken.outcome is Outcome.REJECTED


async def test_family_setting_spells_the_envelope(rig: Rig) -> None:
    rig.intake.family = FamilyForm.UPSTREAM
    result = await rig.intake.submit(Submission(Kind.CI, sample("ci"), "ci"))
    assert (
        result.event is not None and result.event.envelope["event_family"] == "external_integration"
    )


async def test_observability_events_are_stored_by_their_id(rig: Rig) -> None:
    event = sample("graph_update")
    first = await rig.intake.submit(Submission(Kind.GRAPH_UPDATE, event, "psg"))
    second = await rig.intake.submit(Submission(Kind.GRAPH_UPDATE, event, "psg"))
    assert (first.outcome, second.outcome) == (Outcome.ACCEPTED, Outcome.DUPLICATE)
    assert first.event is not None and first.event.envelope == event


async def test_a_large_batch_keeps_order_and_stores_everything(rig: Rig) -> None:
    submissions = [
        Submission(
            Kind.FILE_UPDATE,
            sample("file_update") | {"file_path": f"f{i}.py", "change_type": "modified"},
            "ide",
        )
        for i in range(1000)
    ]
    submissions[500] = Submission(Kind.FILE_UPDATE, {"file_path": ""}, "ide")
    results = await rig.intake.submit_many(submissions)
    assert [r.outcome for r in results].count(Outcome.ACCEPTED) == 999
    assert results[500].outcome is Outcome.REJECTED
    stored = await rig.stored()
    assert [e.envelope["payload"]["file_path"] for e in stored] == [
        f"f{i}.py" for i in range(1000) if i != 500
    ]


async def test_batches_submitted_together_are_stored_each_whole_in_call_order(
    rig: Rig,
) -> None:
    """A caller may hand over its next batch before the last one is stored (file activity
    keeps a few in flight): batches larger than a slice still reach the store in the order
    they were submitted, never interleaved."""

    def batch(name: str) -> list[Submission]:
        payload = sample("file_update") | {"change_type": "modified"}
        return [
            Submission(Kind.FILE_UPDATE, payload | {"file_path": f"{name}{i}.py"}, "ide")
            for i in range(300)
        ]

    first, second, third = batch("a"), batch("b"), batch("c")
    await asyncio.gather(*(rig.intake.submit_many(b) for b in (first, second, third)))
    stored = [e.envelope["payload"]["file_path"] for e in await rig.stored()]
    assert stored == [s.data["file_path"] for s in (*first, *second, *third)]


# Paths in one batch, some holding a credential, as a watcher reports them (trusted: already
# workspace-relative) and as an API client does (checked); the batch is judged in one pass.
_SECRET_PATHS = (f"keys/{CANARY}.txt", "cfg/password=hunter2/a.py", "fix/token:abc123/b.py")


@pytest.mark.parametrize("trusted", [True, False])
async def test_each_path_holding_a_credential_is_refused_in_a_batch(
    rig: Rig, trusted: bool
) -> None:
    paths = [f"src/f{i}.py" for i in range(600)]
    for index, secret in zip((3, 300, 599), _SECRET_PATHS, strict=True):
        paths[index] = secret
    submissions = [
        Submission(
            Kind.FILE_UPDATE,
            {**sample("file_update"), "file_path": path},
            "ide",
            trusted_paths=trusted,
        )
        for path in paths
    ]
    results = await rig.intake.submit_many(submissions)
    refused = [path for path, r in zip(paths, results, strict=True) if not r.accepted]
    assert refused == list(_SECRET_PATHS)
    assert all(results[paths.index(path)].result.codes == ["path_secret"] for path in _SECRET_PATHS)
    stored = [e.envelope["payload"]["file_path"] for e in await rig.stored()]
    assert stored == [path for path in paths if path not in _SECRET_PATHS]


async def test_non_object_input_is_rejected_not_raised(rig: Rig) -> None:
    result = await rig.intake.submit(Submission(Kind.TOOL, ["not", "a", "dict"], "http"))
    assert result.outcome is Outcome.REJECTED
    assert result.result.codes == ["type"]


async def test_many_concurrent_submitters_share_commits(rig: Rig) -> None:
    async def one(i: int) -> Any:
        return await rig.intake.submit(
            Submission(Kind.FILE_UPDATE, sample("file_update") | {"file_path": f"c{i}.py"}, "ide")
        )

    results = await asyncio.gather(*(one(i) for i in range(300)))
    assert all(r.accepted for r in results)
    assert rig.writer.commits < 300


def file_update(path: str) -> Submission:
    return Submission(Kind.FILE_UPDATE, {**sample("file_update"), "file_path": path}, "ide")


async def test_quiet_waits_for_a_submission_in_progress(rig: Rig) -> None:
    held = threading.Event()
    blocker = asyncio.ensure_future(rig.writer.run(lambda _conn: held.wait(30)))
    submitting = asyncio.ensure_future(rig.intake.submit(file_update("held.py")))
    waiting = asyncio.ensure_future(rig.intake.quiet(settle=0, limit=30))
    await asyncio.sleep(0.2)
    assert not submitting.done() and not waiting.done()
    held.set()
    await waiting
    assert submitting.done() and submitting.result().accepted
    await blocker


async def test_quiet_gives_up_at_its_limit(rig: Rig) -> None:
    held = threading.Event()
    blocker = asyncio.ensure_future(rig.writer.run(lambda _conn: held.wait(30)))
    submitting = asyncio.ensure_future(rig.intake.submit(file_update("held.py")))
    await asyncio.sleep(0)
    await rig.intake.quiet(settle=0, limit=0.2)
    assert not submitting.done()  # a steady stream cannot hold derived work back for good
    held.set()
    await asyncio.gather(blocker, submitting)


async def test_quiet_lets_the_intake_settle_after_the_last_submission(rig: Rig) -> None:
    await rig.intake.submit(file_update("a.py"))
    loop = asyncio.get_running_loop()
    begin = loop.time()
    await rig.intake.quiet(settle=0.3, limit=30)
    assert loop.time() - begin >= 0.25  # from the end of the submission, not from the call


async def test_quiet_waits_while_a_batch_is_made_ready(rig: Rig) -> None:
    """A burst's batch is read against the store and screened before it is submitted: the
    graph's work waits for that too, not only for the submission itself."""
    with rig.intake.busy():
        waiting = asyncio.ensure_future(rig.intake.quiet(settle=0, limit=30))
        await asyncio.sleep(0.2)
        assert not waiting.done()
    await waiting


async def test_text_with_a_lone_surrogate_is_refused_and_nothing_else_is_lost(rig: Rig) -> None:
    # json.loads reads "\udc80" escapes into lone surrogates, os.fsdecode makes them of names
    # whose bytes are not UTF-8. SQLite cannot store them; written, they failed the whole
    # transaction, so the events committed with them were lost too.
    envelope = build_envelope(Kind.TOOL, sample("tool"), source_module="hook")
    received = json.loads(json.dumps(envelope).replace("hook", "ho\\udc80ok"))
    batch = [file_update("a.py"), Submission(Kind.ENVELOPE, received, "http"), file_update("b.py")]
    bad_root = Submission(
        Kind.FILE_UPDATE, {**sample("file_update"), "workspace_root": "/w/\udcff"}, "ide"
    )
    results, lone = await asyncio.gather(rig.intake.submit_many(batch), rig.intake.submit(bad_root))
    assert [r.outcome for r in results] == [Outcome.ACCEPTED, Outcome.REJECTED, Outcome.ACCEPTED]
    assert [(e.path, e.code) for e in results[1].result.errors] == [
        ("source_module", "text_not_unicode")
    ]
    assert [(e.path, e.code) for e in lone.result.errors] == [
        ("payload.workspace_root", "text_not_unicode")
    ]
    assert [e.envelope["payload"]["file_path"] for e in await rig.stored()] == ["a.py", "b.py"]
    assert len(rig.log.read()) == 2

"""Dedup by the spec (§6.4.1): a tool event is its invocation, status and times as
instants; a git event is its operation. And the upgrade that re-keys a stored log."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.engine.intake import Outcome, Submission
from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from mplp_lsp.store.database import connect, transaction
from mplp_lsp.store.dedup import DIGEST_SIZE, event_key, payload_key
from mplp_lsp.store.events import EventLog, NewEvent, prepare_events
from tests.conftest import sample
from tests.old_store import store_at_version
from tests.support.stores import Rig
from tests.support.stores import rig as intake_rig

rig = intake_rig


async def outcomes(rig: Rig, kind: Kind, payloads: list[dict[str, Any]]) -> list[Outcome]:
    results = await rig.intake.submit_many([Submission(kind, p, "test") for p in payloads])
    return [r.outcome for r in results]


async def test_a_tool_state_resent_with_another_offset_or_summary_is_one_event(rig: Rig) -> None:
    first = sample("tool")
    offset = {**first, "started_at": "2026-03-02T08:00:00+00:00"}
    offset["completed_at"] = "2026-03-02T09:00:01.25+01:00"  # the same instant
    summary = {**first, "output_summary": "2 errors (re-sent)"}
    running = {**first, "status": "running"}
    later = {**first, "completed_at": "2026-03-02T08:00:02Z"}
    got = await outcomes(rig, Kind.TOOL, [first, offset, summary, running, later])
    assert got == [Outcome.ACCEPTED, Outcome.DUPLICATE, Outcome.DUPLICATE] + [Outcome.ACCEPTED] * 2


async def test_a_commit_is_one_operation_whatever_branch_reports_it(rig: Rig) -> None:
    commit = {**sample("git"), "event_kind": "commit", "parent_commits": ["1" * 40]}
    elsewhere = {**commit, "ref_name": "refs/heads/topic", "commit_message": "other words"}
    create = {"repo_url": commit["repo_url"], "commit_id": commit["commit_id"]}
    create |= {"event_kind": "branch_create", "timestamp": commit["timestamp"]}
    on_main = {**create, "ref_name": "refs/heads/main"}
    on_topic = {**create, "ref_name": "refs/heads/topic"}
    got = await outcomes(rig, Kind.GIT, [commit, elsewhere, on_main, on_topic, on_topic])
    accepted, duplicate = Outcome.ACCEPTED, Outcome.DUPLICATE
    assert got == [accepted, duplicate, accepted, accepted, duplicate]


offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(moment=moments, zone=offsets, spelled_z=st.booleans())
def test_tool_times_compare_as_instants(moment: datetime, zone: timezone, spelled_z: bool) -> None:
    base = sample("tool")
    utc = moment.isoformat().replace("+00:00", "Z") if spelled_z else moment.isoformat()
    shifted = moment.astimezone(zone).isoformat()
    one = {**base, "started_at": utc, "completed_at": utc}
    other = {**base, "started_at": shifted, "completed_at": shifted}
    assert event_key("tool", one) == event_key("tool", other)
    assert event_key("tool", one) != event_key("tool", {**one, "status": "succeeded"})


WHOLE_PAYLOAD_KEYS = 9  # the last schema whose tool and git keys digest the whole payload


def whole_payload_key(kind: str, payload: dict[str, Any]) -> bytes:
    """The key schema 9 stored: a digest of the whole payload."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.blake2b(f"{kind}\0{canonical}".encode(), digest_size=DIGEST_SIZE).digest()
    return payload_key(digest, payload)


@pytest.fixture
async def upgraded(tmp_path: Path) -> AsyncIterator[Path]:
    database = tmp_path / "events.db"
    old = store_at_version(database, WHOLE_PAYLOAD_KEYS)
    tool = sample("tool")
    twice = [tool, {**tool, "output_summary": "the same state, re-sent"}]
    events = [
        NewEvent(f"id-{i}", "tool", whole_payload_key("tool", p), p["started_at"],
                 build_envelope(Kind.TOOL, p, source_module="test"))
        for i, p in enumerate(twice)
    ]  # fmt: skip
    # Inserted as that release did: today's append also counts the rows for the forwarding
    # sinks, whose table a schema-9 store does not have yet.
    with transaction(old):
        old.executemany(
            "INSERT INTO events (event_id, kind, dedup_key, timestamp, received_at, body, minted)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [item.row("2026-01-01T00:00:00.000Z") for item in prepare_events(events)],
        )
    old.close()
    yield database


async def test_the_upgrade_rekeys_stored_tool_events(upgraded: Path) -> None:
    conn = connect(upgraded)  # migrates
    try:
        rows = conn.execute("SELECT dedup_key FROM events ORDER BY seq").fetchall()
        assert len(rows) == 2  # nothing stored is dropped
        tool = sample("tool")
        assert rows[0][0] == event_key("tool", tool)  # the first takes today's key
        assert rows[1][0] == whole_payload_key(
            "tool", {**tool, "output_summary": "the same state, re-sent"}
        )
        resent = {**tool, "started_at": tool["started_at"].replace("Z", "+00:00")}
        prepared = NewEvent("id-new", "tool", event_key("tool", resent), resent["started_at"],
                            build_envelope(Kind.TOOL, resent, source_module="test"))  # fmt: skip
        assert EventLog(conn).append([prepared]) == [None]  # a duplicate of the stored one
    finally:
        conn.close()

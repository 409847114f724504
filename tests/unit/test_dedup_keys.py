"""Dedup keys as stored: the event's own time first, then the digest of its identity."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.dedup import DIGEST_SIZE, KEY_SIZE, current_key, id_key, payload_key

DIGEST = bytes(range(DIGEST_SIZE))
moments = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2105, 12, 31), timezones=st.just(UTC)
)


def seconds_of(key: bytes) -> int:
    return int.from_bytes(key[: KEY_SIZE - DIGEST_SIZE], "big")


@given(first=moments, second=moments)
def test_keys_sort_by_the_events_own_time(first: datetime, second: datetime) -> None:
    early, late = sorted((first, second))
    early_key = payload_key(DIGEST, {"timestamp": utc_timestamp(early)})
    late_key = payload_key(DIGEST, {"timestamp": utc_timestamp(late)})
    assert seconds_of(early_key) == int(early.timestamp())
    assert early_key <= late_key
    assert len(early_key) == KEY_SIZE and early_key.endswith(DIGEST)


def test_tool_and_ci_payloads_use_their_start_then_completion_time() -> None:
    started = "2026-03-02T08:00:00Z"
    completed = "2026-03-02T09:00:00Z"
    both = payload_key(DIGEST, {"started_at": started, "completed_at": completed})
    only_completed = payload_key(DIGEST, {"completed_at": completed})
    assert seconds_of(both) == int(datetime.fromisoformat(started).timestamp())
    assert seconds_of(only_completed) == int(datetime.fromisoformat(completed).timestamp())


@given(moment=st.one_of(st.text(max_size=40), st.integers(), st.none(), st.floats()))
def test_a_missing_or_unreadable_time_sorts_first_and_never_fails(moment: object) -> None:
    key = payload_key(DIGEST, {"timestamp": moment})
    assert key.endswith(DIGEST) and len(key) == KEY_SIZE
    readable = isinstance(moment, str) and _parses(moment)
    if not readable:
        assert seconds_of(key) == 0


def test_times_outside_the_four_byte_range_are_clamped() -> None:
    assert seconds_of(payload_key(DIGEST, {"timestamp": "1900-01-01T00:00:00Z"})) == 0
    assert seconds_of(payload_key(DIGEST, {"timestamp": "2200-01-01T00:00:00Z"})) == 2**32 - 1


def test_the_same_id_gives_the_same_key_and_another_id_another() -> None:
    stamp = "2026-03-02T08:00:00.000Z"
    assert id_key("a", stamp) == id_key("a", stamp)
    assert id_key("a", stamp) != id_key("b", stamp)


@given(
    digest=st.binary(min_size=DIGEST_SIZE, max_size=DIGEST_SIZE),
    moment=moments,
    event_id=st.uuids().map(str),
)
def test_every_older_form_becomes_todays_key_once_and_stays(
    digest: bytes, moment: datetime, event_id: str
) -> None:
    stamp = utc_timestamp(moment)
    body = json.dumps({"event_id": event_id, "timestamp": stamp, "payload": {"timestamp": stamp}})
    today = payload_key(digest, {"timestamp": stamp})
    assert current_key(digest.hex(), body) == today
    assert current_key(digest, body) == today
    assert current_key(today, body) == today
    assert current_key(f"id:{event_id}", body) == id_key(event_id, stamp)
    assert current_key("some-other-key", body) == "some-other-key"


def test_a_damaged_body_still_gives_a_key() -> None:
    assert current_key(DIGEST, "not json") == bytes(KEY_SIZE - DIGEST_SIZE) + DIGEST
    assert current_key(DIGEST, "[1, 2]") == bytes(KEY_SIZE - DIGEST_SIZE) + DIGEST


def _parses(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True

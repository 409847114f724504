"""Dedup keys as stored: the event's own time first, then the digest of its identity."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.dedup import (
    DIGEST_SIZE,
    KEY_SIZE,
    current_key,
    event_key,
    id_key,
    identity,
    payload_key,
)
from tests.support.properties import examples

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


# Keys as mplp-lsp 0.x stored them (computed before the canonical form took the orjson path):
# a store written then must still find these events duplicates.
STORED_KEYS = [
    (
        "file_update",
        {
            "file_path": 'src/naïve "q"\n\u2028.py',
            "change_type": "modified",
            "timestamp": "2026-03-02T08:00:00.123Z",
            "language": "python",
            "lines_added": 3,
            "lines_removed": 0,
        },
        "69a54380c20f30a573d4946d6a51b4611b84650e",
    ),
    (
        "file_update",
        {
            "file_path": "src/\udcff.txt",
            "change_type": "created",
            "timestamp": "2026-03-02T08:00:00.123Z",
        },
        "69a54380cb047ee8493a701a608a10e9befee49b",
    ),
    (
        "tool",
        {
            "invocation_id": "run-1",
            "status": "succeeded",
            "started_at": "2026-03-02T08:00:00+01:00",
            "completed_at": None,
            "tool_id": "ruff",
        },
        "69a535701077d262905305551475044be45d66fd",
    ),
]


@pytest.mark.parametrize(("kind", "payload", "stored"), STORED_KEYS)
def test_a_payload_keeps_the_key_earlier_releases_stored(
    kind: str, payload: dict[str, object], stored: str
) -> None:
    assert event_key(kind, payload).hex() == stored


def reference_key(kind: str, payload: dict[str, object]) -> bytes:
    """The key as the module docstring defines it, written with ``json`` alone."""
    canonical = json.dumps(
        identity(kind, payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    named = f"{kind}\0{canonical}".encode(errors="surrogatepass")
    return payload_key(hashlib.blake2b(named, digest_size=DIGEST_SIZE).digest(), payload)


any_text = st.text(st.characters(codec=None, blacklist_categories=()), max_size=12)
flat_values = st.one_of(
    any_text,
    st.sampled_from(["created", "modified", "2026-03-02T08:00:00.123Z", "\ud800", "é\x00\x7f"]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
)
payloads = st.dictionaries(
    st.one_of(any_text, st.sampled_from(["file_path", "timestamp", "invocation_id", "status"])),
    st.one_of(
        flat_values,
        st.lists(flat_values, max_size=3),
        st.dictionaries(any_text, flat_values, max_size=2),
    ),
    max_size=8,
)


@settings(max_examples=examples(2000))
@given(kind=st.sampled_from(["file_update", "tool", "git", "ci"]), payload=payloads)
def test_every_payloads_key_is_byte_for_byte_the_json_form(
    kind: str, payload: dict[str, object]
) -> None:
    """Flat identities are written by orjson, the rest by json: one key either way."""
    assert event_key(kind, payload) == reference_key(kind, payload)

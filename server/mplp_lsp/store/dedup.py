"""Dedup keys as the event log stores them: the event's own time, then a digest.

The unique index on ``dedup_key`` is what makes "the same event twice is stored once" hold
across restarts. A digest alone is a random key: each new event lands on a random page of
that index, so a commit rewrites about one index page per event into the WAL, and the cost
grows with the store until the index no longer fits in the page cache. Put the event's own
time in front (whole seconds, 4 bytes, big-endian) and new keys land next to each other at
the end of the index, as rowids do: a commit touches a handful of pages whatever the size
of the store.

The time is taken from the event itself, never from the clock, so the same event submitted
again gets the same key: a payload's ``timestamp`` (or ``started_at``/``completed_at`` for
tool and CI payloads, which have no ``timestamp``), an L3 event's envelope ``timestamp``.
Which field is used changes only where a key sorts, never whether two keys are equal: the
digest covers the whole identity. A missing or unreadable time sorts first (0).

What the digest covers (:func:`identity`) is what makes two submissions the same event:

* a tool event (spec §6.4.1: "deduplicate using ``timestamp`` and ``invocation_id``"): its
  ``invocation_id``, ``status`` and its ``started_at``/``completed_at`` as instants (``Z``
  and ``+00:00``, or any offset naming the same instant, are equal); a changed
  ``output_summary`` re-sent for the same state is the same event;
* a git event: the operation. A commit is made once, whichever branch it was first seen on
  (a hook reports it on the branch it was made on; a poller that looks after that branch
  was merged and deleted sees it on the branch it reached), so ``commit`` is the commit in
  the repository; every other kind is the ref and the commit it names;
* any other payload: the whole payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final

__all__ = [
    "DIGEST_SIZE",
    "KEY_SIZE",
    "current_key",
    "dedup_param",
    "event_key",
    "id_key",
    "identity",
    "payload_key",
    "stored_event_key",
]

DIGEST_SIZE: Final = 16
_TIME_SIZE: Final = 4
KEY_SIZE: Final = _TIME_SIZE + DIGEST_SIZE
_LATEST: Final = 2 ** (8 * _TIME_SIZE) - 1
_PAYLOAD_TIMES: Final = ("timestamp", "started_at", "completed_at")
_HEX_DIGITS: Final = frozenset("0123456789abcdef")
# One encoder for every key: json.dumps with options builds a new encoder on each call.
_CANONICAL: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_TOOL_TIMES: Final = ("started_at", "completed_at")
# Values orjson writes exactly as _CANONICAL does (strings without lone surrogates, integers
# within 64 bits; tests/unit/test_dedup_keys.py): not floats (``1e+16`` against ``1e16``).
_FLAT: Final = frozenset({str, int, bool, type(None)})


def identity(kind: str, payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """What makes two payloads of ``kind`` the same event (see the module docstring)."""
    if kind == "tool" and isinstance(payload.get("invocation_id"), str):
        same: dict[str, Any] = {"invocation_id": payload["invocation_id"]}
        same["status"] = payload.get("status")
        for name in _TOOL_TIMES:
            same[name] = _instant(payload.get(name))
        return same
    if kind == "git" and isinstance(payload.get("commit_id"), str):
        names: tuple[str, ...] = ("repo_url", "event_kind", "commit_id")
        if payload.get("event_kind") != "commit":
            names += ("ref_name",)
        return {name: payload.get(name) for name in names}
    return payload


def event_key(kind: str, payload: Mapping[str, Any]) -> bytes:
    """The dedup key of a payload of ``kind``: same identity, same key."""
    named = kind.encode(errors="surrogatepass") + b"\0" + _canonical(identity(kind, payload))
    return payload_key(_digest_bytes(named), payload)


def _canonical(same: Mapping[str, Any]) -> bytes:
    """``same`` as sorted, compact JSON (non-ASCII as is), UTF-8 with lone surrogates kept.

    A flat identity (every file event, and the tool and Git identities) is written by orjson,
    byte for byte what ``json`` writes and 15x faster (the encoding was half of a key, and
    keys a sixth of a burst's intake); anything orjson refuses or writes otherwise (a nested
    value, a float, a lone surrogate, an integer beyond 64 bits) goes through ``json``. Keys
    stored by earlier runs must keep matching: the bytes may never change.
    """
    if type(same) is dict and all(type(value) in _FLAT for value in same.values()):
        import orjson  # loaded with the first stored event (events.encode_body)

        try:
            return orjson.dumps(same, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass
    return _CANONICAL.encode(same).encode(errors="surrogatepass")


def stored_event_key(kind: str, body: str) -> bytes | None:
    """The key today's intake gives a stored payload event (``body``: its envelope); None
    for an event that is not one. The upgrade to identity keys runs this over the log."""
    payload = _envelope(body).get("payload")
    return event_key(kind, payload) if isinstance(payload, Mapping) else None


def _instant(moment: object) -> object:
    """An ISO 8601 time as the instant it names (UTC, microseconds); anything else as is."""
    if not isinstance(moment, str):
        return moment
    try:
        parsed = datetime.fromisoformat(moment)
    except ValueError:
        return moment
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).isoformat(timespec="microseconds")


def payload_key(digest: bytes, payload: Mapping[str, Any]) -> bytes:
    """The key of a payload whose identity digest is ``digest``."""
    moment = None
    for name in _PAYLOAD_TIMES:
        moment = payload.get(name)
        if moment is not None:
            break
    return _seconds(moment) + digest


def id_key(event_id: str, timestamp: object) -> bytes:
    """The key of an event identified by its id (an L3 event): same id, same key."""
    return _seconds(timestamp) + _digest(f"id\0{event_id}")


def _digest(text: str) -> bytes:
    return _digest_bytes(text.encode(errors="surrogatepass"))


def _digest_bytes(data: bytes) -> bytes:
    # Imported here: hashlib loads OpenSSL (10-25 ms), and a reader of the store (the
    # `events` command) makes no key.
    import hashlib

    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


def dedup_param(key: str | bytes) -> str | bytes:
    """How a key is bound: 32 lowercase hex digits as their 16 bytes, others as given.

    Hex digests were the intake's key form before keys were bytes; SQLite never finds a
    blob equal to a text value, so the two forms cannot collide.
    """
    if isinstance(key, str) and len(key) == 2 * DIGEST_SIZE and _HEX_DIGITS.issuperset(key):
        return bytes.fromhex(key)
    return key


def current_key(key: str | bytes, body: str) -> str | bytes:
    """``key`` of a row written by an older mplp-lsp, in today's form (``body``: its envelope).

    Older forms: the payload digest alone, as 32 hex digits or as its 16 bytes, and
    ``id:<event_id>`` for L3 events. A key already in today's form, or in none of these
    forms, is returned as it is, so this can run over a table more than once.
    """
    if isinstance(key, str) and key.startswith("id:"):
        return id_key(key[3:], _envelope(body).get("timestamp"))
    key = dedup_param(key)
    if isinstance(key, str) or len(key) != DIGEST_SIZE:
        return key
    payload = _envelope(body).get("payload")
    return payload_key(key, payload if isinstance(payload, Mapping) else {})


def _envelope(body: str) -> Mapping[str, Any]:
    try:
        envelope = json.loads(body)
    except (TypeError, ValueError):
        return {}
    return envelope if isinstance(envelope, Mapping) else {}


def _seconds(moment: object) -> bytes:
    if not isinstance(moment, str):
        return bytes(_TIME_SIZE)
    return _seconds_of(moment)


@lru_cache(maxsize=256)
def _seconds_of(moment: str) -> bytes:
    # Cached: the events of a burst share a handful of times, and parsing was a seventh of a key.
    try:
        parsed = datetime.fromisoformat(moment)
    except ValueError:
        return bytes(_TIME_SIZE)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        seconds = int(parsed.timestamp())
    except (OverflowError, OSError, ValueError):
        return bytes(_TIME_SIZE)
    return min(max(seconds, 0), _LATEST).to_bytes(_TIME_SIZE, "big")

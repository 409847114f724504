"""Building ExternalIntegrationEvent envelopes around integration payloads."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any

from mplp_lsp import __version__
from mplp_lsp.protocol.kinds import SPEC_FAMILY, UPSTREAM_FAMILY, Kind, event_type_for


class FamilyForm(StrEnum):
    """How ``event_family`` is spelled on output; both are accepted on input."""

    SPEC = SPEC_FAMILY
    UPSTREAM = UPSTREAM_FAMILY


def utc_timestamp(moment: datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds and ``Z``: ``2025-11-30T10:15:30.123Z``."""
    if moment is None:
        now = time.time()
        second = int(now)
        return f"{_second_prefix(second)}{int((now - second) * 1000):03d}Z"
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@lru_cache(maxsize=4)
def _second_prefix(second: int) -> str:
    # strftime is most of a timestamp's cost; a burst stamps many events in the same second
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")


class _RandomPool:
    """Random bytes drawn from the OS a page at a time: one syscall per 256 ids, not one each."""

    def __init__(self) -> None:
        self._bytes = b""
        self._next = 0
        self._lock = threading.Lock()

    def take16(self) -> bytes:
        with self._lock:
            if self._next >= len(self._bytes):
                self._bytes, self._next = os.urandom(4096), 0
            start = self._next
            self._next += 16
            return self._bytes[start : start + 16]


_pool = _RandomPool()


def new_id() -> str:
    """A lowercase UUID version 4 (RFC 9562: random bits, version and variant set)."""
    raw = bytearray(_pool.take16())
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def default_source(adapter: str = "mplp-lsp") -> str:
    """Adapter name plus version, as the spec asks every event to carry."""
    return f"{adapter}/{__version__}"


def build_envelope(
    kind: Kind,
    payload: Mapping[str, Any],
    *,
    source_module: str,
    source: str | None = None,
    family: FamilyForm = FamilyForm.SPEC,
    event_id: str | None = None,
    timestamp: str | None = None,
) -> dict[str, Any]:
    return {
        "event_id": event_id or new_id(),
        "event_family": str(family),
        "event_type": event_type_for(kind),
        "timestamp": timestamp or utc_timestamp(),
        "source_module": source_module,
        "source": source or default_source(),
        "payload": dict(payload),
    }

"""Building ExternalIntegrationEvent envelopes around integration payloads."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from mplp_lsp import __version__
from mplp_lsp.protocol.kinds import SPEC_FAMILY, UPSTREAM_FAMILY, Kind, event_type_for


class FamilyForm(StrEnum):
    """How ``event_family`` is spelled on output; both are accepted on input."""

    SPEC = SPEC_FAMILY
    UPSTREAM = UPSTREAM_FAMILY


def utc_timestamp(moment: datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds and ``Z``: ``2025-11-30T10:15:30.123Z``."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def new_id() -> str:
    return str(uuid.uuid4())


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

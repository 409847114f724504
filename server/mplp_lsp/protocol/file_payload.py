"""The file_update payload the daemon builds, and the envelope carrying it, recognised
without the schema engines.

Every file event of a burst has the same few fields (``engine/file_activity.file_submissions``):
``file_path``, ``change_type``, ``timestamp``, and maybe ``language``, ``previous_path``,
``workspace_root``, ``lines_added``/``lines_removed``. For such a payload the schema
(``mplp-file-update-event.schema.json``: a closed object) and the invariants of the
``file_update_event`` scope come down to the checks below; asking both engines was a quarter
of the intake's time per event. :func:`plain_file_update` says True only where they would
accept; False means "ask them", never "rejected", so a verdict is always theirs.
tests/unit/test_file_payload.py holds the two to the same verdicts, and fails when the
schema or the scope's invariants change under this module.

The team collector validates every forwarded event as an envelope (the external integration
event around the payload): for one carrying such a payload, :func:`plain_file_envelope`
adds the envelope schema's fields and the observability invariants of its family the same
way (the engines and invariants were about 40% of the collector's work per envelope).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from mplp_lsp.protocol.formats import is_date_time, is_uuid, is_uuid_v4_lower

CHANGE_TYPES: Final = frozenset({"created", "modified", "deleted", "renamed"})
_TEXTS: Final = ("language", "previous_path", "workspace_root")
_COUNTS: Final = ("lines_added", "lines_removed")
FIELDS: Final = frozenset({"file_path", "change_type", "timestamp", *_TEXTS, *_COUNTS})

# The events of one burst share a handful of times: a verdict per time, not per event.
_date_time = lru_cache(maxsize=64)(is_date_time)

# The envelope (mplp-external-integration-event.schema.json, a closed object): every field
# but project_id is required; event_family takes the spec's or the upstream name.
ENVELOPE_REQUIRED: Final = frozenset(
    {"event_id", "event_family", "event_type", "timestamp", "source_module", "source", "payload"}
)
ENVELOPE_FIELDS: Final = ENVELOPE_REQUIRED | {"project_id"}
FAMILIES: Final = frozenset({"ExternalIntegrationEvent", "external_integration"})


def plain_file_update(data: Any) -> bool:
    """True when ``data`` is a file_update payload of the daemon's own shape that the schema
    and the invariants accept; False when they must decide."""
    if type(data) is not dict or not FIELDS.issuperset(data):
        return False
    path, change, stamp = data.get("file_path"), data.get("change_type"), data.get("timestamp")
    if type(path) is not str or not path.strip():  # the invariant: non-empty after strip
        return False
    if type(change) is not str or change not in CHANGE_TYPES:
        return False
    if type(stamp) is not str or not _date_time(stamp):
        return False
    for name in _TEXTS:
        if name in data and type(data[name]) is not str:
            return False
    for name in _COUNTS:
        if name in data and (type(data[name]) is not int or data[name] < 0):
            return False
    return True


def plain_file_envelope(data: Any) -> bool:
    """True when ``data`` is an envelope of a file_update whose payload
    :func:`plain_file_update` accepts, and which the envelope's schema and the observability
    invariants accept; False when the engines must decide."""
    if type(data) is not dict or not ENVELOPE_FIELDS.issuperset(data):
        return False
    if not ENVELOPE_REQUIRED.issubset(data):
        return False
    if type(data["event_type"]) is not str or data["event_type"] != "file_update":
        return False
    # A lowercase UUID v4 is the invariant; it is also the schema's uuid format.
    if type(data["event_id"]) is not str or not is_uuid_v4_lower(data["event_id"]):
        return False
    family, stamp = data["event_family"], data["timestamp"]
    if type(family) is not str or family not in FAMILIES:
        return False
    if type(stamp) is not str or not is_date_time(stamp):  # one time per event: no cache
        return False
    for name in ("source_module", "source"):
        if type(data[name]) is not str or not data[name]:  # minLength 1
            return False
    if "project_id" in data and (
        type(data["project_id"]) is not str or not is_uuid(data["project_id"])
    ):
        return False
    return plain_file_update(data["payload"])

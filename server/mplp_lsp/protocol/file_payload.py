"""The file_update payload the daemon builds, recognised without the schema engines.

Every file event of a burst has the same few fields (``engine/file_activity.file_submissions``):
``file_path``, ``change_type``, ``timestamp``, and maybe ``language``, ``previous_path``,
``workspace_root``, ``lines_added``/``lines_removed``. For such a payload the schema
(``mplp-file-update-event.schema.json``: a closed object) and the invariants of the
``file_update_event`` scope come down to the checks below; asking both engines was a quarter
of the intake's time per event. :func:`plain_file_update` says True only where they would
accept; False means "ask them", never "rejected", so a verdict is always theirs.
tests/unit/test_file_payload.py holds the two to the same verdicts, and fails when the
schema or the scope's invariants change under this module.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from mplp_lsp.protocol.formats import is_date_time

CHANGE_TYPES: Final = frozenset({"created", "modified", "deleted", "renamed"})
_TEXTS: Final = ("language", "previous_path", "workspace_root")
_COUNTS: Final = ("lines_added", "lines_removed")
FIELDS: Final = frozenset({"file_path", "change_type", "timestamp", *_TEXTS, *_COUNTS})

# The events of one burst share a handful of times: a verdict per time, not per event.
_date_time = lru_cache(maxsize=64)(is_date_time)


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

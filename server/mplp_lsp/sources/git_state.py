"""What the Git source keeps in the store: the refs as last reported (table ``git_refs``), the
branch ``HEAD`` pointed to then, and how far the hooks' spool was read.

Ref names are recorded as the events name them: redacted (a branch ``fix/password=...``
keeps no password), the branch of ``HEAD`` too. Comparisons with the repository go through
:func:`as_current`, which maps a stored name back to the ref it stands for.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field

from mplp_lsp.sanitize.redact import redact_name, redact_names
from mplp_lsp.store.events import EventLog
from mplp_lsp.vcs.spool import Offsets

BASELINE_KEY = "git.baseline"
HEAD_KEY = "git.head"  # the branch HEAD pointed to when the refs were recorded; "": detached
SPOOL_KEY = "git.spool"  # JSON: taken spool log -> bytes read


@dataclass(slots=True)
class Recorded:
    refs: dict[str, str] | None  # names as stored; None: this store never recorded any
    head_target: str | None  # HEAD's branch (stored redacted: loaded, it is the stored name)
    offsets: Offsets = field(default_factory=dict)


def stored_refs(refs: Mapping[str, str]) -> dict[str, str]:
    return dict(zip(redact_names(list(refs)), refs.values(), strict=True))


def as_current(recorded: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """``recorded`` under the names the refs have now: a stored (redacted) name becomes the
    current ref it stands for; names already current stay."""
    names = list(current)
    real = {
        stored: name
        for stored, name in zip(redact_names(names), names, strict=True)
        if stored != name
    }
    return {real.get(name, name): value for name, value in recorded.items()}


def load(conn: sqlite3.Connection) -> Recorded:
    events = EventLog(conn)
    refs = None
    if events.get_meta(BASELINE_KEY) is not None:
        refs = dict(conn.execute("SELECT ref_name, object_id FROM git_refs").fetchall())
    return Recorded(refs, events.get_meta(HEAD_KEY) or None, _offsets(events.get_meta(SPOOL_KEY)))


def load_refs(conn: sqlite3.Connection) -> dict[str, str] | None:
    """The recorded refs, names as stored; None if this store never recorded any."""
    return load(conn).refs


def save(conn: sqlite3.Connection, refs: Mapping[str, str], recorded: Recorded) -> None:
    """Record ``refs`` (current names), with ``recorded``'s HEAD target and spool offsets."""
    conn.execute("DELETE FROM git_refs")
    conn.executemany("INSERT INTO git_refs VALUES (?, ?)", sorted(stored_refs(refs).items()))
    events = EventLog(conn)
    events.set_meta(BASELINE_KEY, "1")
    events.set_meta(HEAD_KEY, redact_name(recorded.head_target or ""))
    events.set_meta(SPOOL_KEY, json.dumps(recorded.offsets, sort_keys=True))


def _offsets(text: str | None) -> Offsets:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if type(v) is int and v >= 0}

"""Starting on a damaged store: check it, move it aside, keep what can be read, go on.

:func:`ensure_usable` runs before the writer opens the database. ``PRAGMA quick_check``
decides whether the file is sound (it reads every page once: about a second per GB). If it
is not, or SQLite cannot even open it, the file and its WAL are moved into a
``corrupt-<time>/`` folder beside it (never deleted: a user may want to recover more by
hand), a new store is created, and every row that can still be read is copied over table
by table: in chunks of rowids, then row by row inside a chunk that fails, so one bad page
costs only its own rows. The rows that could not be read are counted, the count of lost
events is added to the outbox's ``quarantined`` counter, and a report is kept in ``meta``
under ``store.salvage``: status shows the store as degraded from then on. Every failure
inside salvage is caught, so a store that cannot be read at all still yields a new, empty,
working store: never a crash loop.

The outbox is copied as it was. If its table could not be read in full for a store that
was forwarding, every salvaged event not dead-lettered is queued again: the remote
deduplicates by (source, event_id), so re-sending is safe and losing is not.

The salvaged store starts a new forwarding stream (a new id, made when forwarding starts):
the events stored next take sequence numbers the lost ones had, and a remote must never see
one (stream, seq) name two events. The loss is counted against the highest ``seq`` known:
the old table's own end if it can be read, the consumers' positions, the outbox, and a
marker beside the store (``<store>.seen``, written at each start and clean close) that
also tells that a store existed where the file is now empty or missing: that is a salvage,
not a fresh start. The event log is appended to at one end and cut by retention only at the
other (:mod:`mplp_lsp.store.retention`, which counts what it removes in the counter
``retention_removed``, noted in the marker too), so the loss is exactly
``highest - removed - copied``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from mplp_lsp.protocol.envelope import utc_timestamp
from mplp_lsp.store.database import connect, transaction
from mplp_lsp.store.dedup import KEY_SIZE
from mplp_lsp.store.queueing import (
    BODY_BYTES,
    COLLECTOR,
    STREAM_KEY_META_KEY,
    STREAM_META_KEY,
    recount,
    recount_held,
)
from mplp_lsp.store.retention import REMOVED_COUNTER

__all__ = [
    "SALVAGE_META_KEY",
    "SalvageReport",
    "ensure_usable",
    "log_extent",
    "note_highest_seq",
    "read_report",
]

log = logging.getLogger(__name__)

SALVAGE_META_KEY: Final = "store.salvage"
_CHUNK: Final = 1000
_EMPTY_CHUNKS_AT_END: Final = 3
_SIDE_FILES: Final = ("-wal", "-shm", "-journal")


@dataclass
class SalvageReport:
    at: str
    problem: str
    moved_to: str | None
    copied: dict[str, int] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    unreadable_tables: list[str] = field(default_factory=list)
    seconds: float = 0.0
    highest_seq: int = 0  # the highest event seq known to have existed
    previous_stream: str | None = None  # the forwarding stream that ended here

    @property
    def lost_events(self) -> int:
        return self.lost.get("events", 0)


def ensure_usable(path: Path) -> SalvageReport | None:
    """Check the store at ``path``; salvage it if damaged. None when nothing was wrong."""
    started = time.monotonic()
    seen = _read_seen(path)
    if not path.exists() or (seen[0] and _is_empty(path)):
        files = [side for side in [path, *_side_paths(path)] if side.exists()]
        if not files and not seen[0]:
            return None  # a new store
        what = "missing" if not path.exists() else "empty"
        report = SalvageReport(utc_timestamp(), f"the store file was {what}", None)
        if files:
            report.moved_to = str(_move_aside(path, files))
        _count_lost_events(report, *seen)
        _record(path, report, started)
        return report
    problem = _problem(path)
    if problem is None:
        note_highest_seq(path, *_highest_stored(path))
        return None
    log.error("the store %s is damaged (%s); moving it aside and salvaging", path, problem)
    files = [path, *(side for side in _side_paths(path) if side.exists())]
    quarantine = _move_aside(path, files)
    report = SalvageReport(utc_timestamp(), problem, str(quarantine))
    try:
        _salvage(quarantine / path.name, path, report, seen)
    except Exception as error:  # salvage is best effort; starting is not optional
        log.exception("salvage of %s stopped early", path)
        report.unreadable_tables.append(f"salvage stopped: {error}")
    _record(path, report, started)
    log.error(
        "salvaged %s: copied %s, lost %s; the damaged file is in %s",
        path,
        report.copied,
        report.lost,
        quarantine,
    )
    return report


def _seen_path(path: Path) -> Path:
    return path.with_name(path.name + ".seen")


def _read_seen(path: Path) -> tuple[int, int]:
    """The highest seq the marker beside the store recorded (0 without a marker), and how
    many events retention had removed below it."""
    try:
        value = json.loads(_seen_path(path).read_text(encoding="utf-8"))
        highest, removed = value["highest_seq"], value.get("removed", 0)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return 0, 0
    if not isinstance(highest, int) or highest <= 0:
        return 0, 0
    return highest, removed if isinstance(removed, int) and 0 <= removed < highest else 0


def note_highest_seq(path: Path, highest: int, removed: int = 0) -> None:
    """Note beside the store at ``path`` that it holds events up to ``highest``, ``removed``
    of them by retention (at each start, clean close and compaction; replaced atomically)."""
    if highest <= 0:
        return
    marker = _seen_path(path)
    temporary = marker.with_name(marker.name + ".tmp")
    try:
        note = {"highest_seq": highest, "removed": removed}
        temporary.write_text(json.dumps(note), encoding="utf-8")
        temporary.replace(marker)
    except OSError:
        log.warning("could not write %s", marker, exc_info=True)


def _is_empty(path: Path) -> bool:
    """A file SQLite opens as a database with no tables (a store truncated to 0 bytes)."""
    try:
        if path.stat().st_size == 0:
            return True
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except (OSError, sqlite3.Error):
        return False
    try:
        return conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None
    except sqlite3.Error:
        return False  # damaged, not empty: quick_check decides
    finally:
        conn.close()


def _highest_stored(path: Path) -> tuple[int, int]:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0, 0
    try:
        return log_extent(conn)
    except sqlite3.Error:
        return 0, 0  # a store not created (or migrated) yet
    finally:
        conn.close()


def log_extent(conn: sqlite3.Connection) -> tuple[int, int]:
    """The log's highest seq, and how many events below it retention removed."""
    highest = int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
    return highest, _removed(conn)


def _removed(conn: sqlite3.Connection) -> int:
    try:
        row = conn.execute("SELECT value FROM counters WHERE name = ?", (REMOVED_COUNTER,))
        found = row.fetchone()
    except sqlite3.Error:
        return 0
    return int(found[0]) if found else 0


def _count_lost_events(report: SalvageReport, highest: int, removed: int = 0) -> None:
    """Lost events: the highest seq known less the events retention removed and those
    copied (the seqs in between have no gaps)."""
    report.highest_seq = max(report.highest_seq, highest)
    expected = report.highest_seq - removed
    lost = max(expected - report.copied.get("events", 0), report.lost_events)
    if lost > 0:
        report.lost["events"] = lost


def read_report(conn: sqlite3.Connection) -> dict[str, Any] | None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (SALVAGE_META_KEY,)).fetchone()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    value = json.loads(row[0])
    return value if isinstance(value, dict) else None


def _side_paths(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in _SIDE_FILES]


def _problem(path: Path) -> str | None:
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as error:
        return str(error)
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.Error as error:
        return str(error)
    finally:
        conn.close()
    if rows == [("ok",)]:
        return None
    return "; ".join(str(row[0]) for row in rows[:3])


def _move_aside(path: Path, files: list[Path]) -> Path:
    stamp = utc_timestamp().replace(":", "").replace("-", "").replace(".", "")
    quarantine = path.with_name(f"corrupt-{stamp}")
    suffix = 1
    while quarantine.exists():
        suffix += 1
        quarantine = path.with_name(f"corrupt-{stamp}-{suffix}")
    quarantine.mkdir(mode=0o700)
    for file in files:
        shutil.move(file, quarantine / file.name)
    return quarantine


def _salvage(old_path: Path, new_path: Path, report: SalvageReport, seen: tuple[int, int]) -> None:
    new = connect(new_path)
    try:
        try:
            old = sqlite3.connect(old_path, isolation_level=None)
            # Read the schema without validating it: one damaged schema page must not hide
            # the tables whose own pages are intact.
            old.execute("PRAGMA writable_schema = ON")
            tables = _tables(old)
        except sqlite3.Error as error:
            report.unreadable_tables.append(f"*: {error}")
            return
        try:
            quarantined = _old_quarantined(old)
            for table in _tables(new):
                if table == "outbox_totals" or table not in tables:
                    continue
                _copy_table(old, new, table, report)
            with transaction(new):
                # Rows from an older store come over with their dedup keys in an older form.
                new.execute(
                    "UPDATE events SET dedup_key = mplp_current_key(dedup_key, body)"
                    " WHERE typeof(dedup_key) = 'text' OR length(dedup_key) != ?",
                    (KEY_SIZE,),
                )
                report.previous_stream = _end_stream(new)
            # The copied counter is the latest count of what retention removed; the marker's
            # stands in when the counters could not be read.
            removed = max(seen[1], _removed(new))
            _count_lost_events(report, max(seen[0], _highest_known(old, new)), removed)
            _restore_outbox(new, quarantined, report)
        finally:
            old.close()
    finally:
        new.close()


def _end_stream(new: sqlite3.Connection) -> str | None:
    """Drop the copied stream id and key: forwarding starts a new stream on the salvaged store."""
    row = new.execute("SELECT value FROM meta WHERE key = ?", (STREAM_META_KEY,)).fetchone()
    new.execute("DELETE FROM meta WHERE key IN (?, ?)", (STREAM_META_KEY, STREAM_KEY_META_KEY))
    return None if row is None else str(row[0])


def _highest_known(old: sqlite3.Connection, new: sqlite3.Connection) -> int:
    """The highest event seq the damaged store shows anywhere: its table's end if that can
    be read, and what was copied of the consumers' positions and the outbox."""
    found = [0]
    with contextlib.suppress(sqlite3.Error):  # the end of the table may be damaged
        found.append(int(old.execute("SELECT coalesce(max(rowid), 0) FROM events").fetchone()[0]))
    queries = (
        "SELECT coalesce(max(seq), 0) FROM events",
        "SELECT coalesce(max(seq), 0) FROM outbox",
        "SELECT coalesce(max(seq), 0) FROM outbox_dead",
        "SELECT coalesce(max(seq), 0) FROM outbox_held",
        "SELECT coalesce(max(CAST(value AS INTEGER)), 0) FROM meta WHERE key LIKE 'consumer.%'",
    )
    for query in queries:
        try:
            found.append(int(new.execute(query).fetchone()[0]))
        except sqlite3.Error:
            continue
    return max(found)


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " ORDER BY rowid"
    )
    return [str(name) for (name,) in rows]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in conn.execute(f'PRAGMA table_info("{table}")')]


def _copy_table(
    old: sqlite3.Connection, new: sqlite3.Connection, table: str, report: SalvageReport
) -> None:
    try:
        wanted = set(_columns(old, table))
        columns = [c for c in _columns(new, table) if c in wanted]
    except sqlite3.Error as error:
        report.unreadable_tables.append(f"{table}: {error}")
        return
    names = ", ".join(f'"{c}"' for c in columns)
    select = f'SELECT rowid, {names} FROM "{table}"'  # noqa: S608 (names from the schema)
    insert = (
        f'INSERT OR IGNORE INTO "{table}" (rowid, {names})'  # noqa: S608
        f" VALUES ({', '.join('?' * (len(columns) + 1))})"
    )
    try:
        top: int | None = old.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0] or 0  # noqa: S608
    except sqlite3.Error:
        top = None  # the end of the table is damaged: read on until nothing more comes
    # A JSON body column (the event log's) must still parse: consumers rely on it.
    body_at = 1 + columns.index("body") if "body" in columns else None
    copied = lost = unconfirmed = empty_chunks = 0
    low = 0
    while (top is None and empty_chunks < _EMPTY_CHUNKS_AT_END) or (top is not None and low < top):
        rows, failed = _read_chunk(old, select, low, low + _CHUNK)
        if rows:
            lost += unconfirmed + failed  # failures before readable rows were real rows
            unconfirmed = empty_chunks = 0
        else:
            unconfirmed += failed
            empty_chunks += 1
        with transaction(new):
            for row in rows:
                if body_at is not None and not _is_json(row[body_at]):
                    lost += 1  # a stored envelope damaged inside its own bytes
                    continue
                try:
                    copied += new.execute(insert, row).rowcount
                except sqlite3.Error:
                    lost += 1  # a damaged value that breaks a constraint
        low += _CHUNK
    if top is not None:
        lost += unconfirmed
    report.copied[table] = copied
    if lost:
        report.lost[table] = lost


def _is_json(value: Any) -> bool:
    try:
        json.loads(value)
    except (TypeError, ValueError):
        return False
    return True


def _read_chunk(old: sqlite3.Connection, select: str, low: int, high: int) -> tuple[list[Any], int]:
    """Rows with ``low < rowid <= high``, and how many rowids could not be read."""
    try:
        return old.execute(f"{select} WHERE rowid > ? AND rowid <= ?", (low, high)).fetchall(), 0
    except sqlite3.Error:
        pass
    rows: list[Any] = []
    failed = 0
    for rowid in range(low + 1, high + 1):
        try:
            row = old.execute(f"{select} WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.Error:
            failed += 1
            continue
        if row is not None:
            rows.append(row)
    return rows, failed


def _old_quarantined(old: sqlite3.Connection) -> int:
    try:
        row = old.execute("SELECT quarantined FROM outbox_totals WHERE id = 1").fetchone()
    except sqlite3.Error:
        return 0
    return 0 if row is None else int(row[0])


def _restore_outbox(new: sqlite3.Connection, quarantined: int, report: SalvageReport) -> None:
    """The copied sinks' queues made consistent with the events that were copied."""
    with transaction(new):
        outbox_damaged = any(
            name in report.lost
            or any(entry.startswith(f"{name}:") for entry in report.unreadable_tables)
            for name in ("outbox", "outbox_sinks")
        )
        if not report.copied.get("outbox_sinks"):
            # Every store has a sink row (the collector's): none copied means they were lost.
            # As when the queue was lost, the collector queues every event not dead-lettered
            # nor held: re-sending is safe, losing is not.
            outbox_damaged = True
            new.execute(
                "INSERT INTO outbox_sinks (name) VALUES (?) ON CONFLICT (name) DO NOTHING",
                (COLLECTOR,),
            )
            new.execute(
                "UPDATE outbox_sinks SET enabled = 1,"
                " cursor = (SELECT coalesce(max(seq), 0) FROM events) WHERE name = ?",
                (COLLECTOR,),
            )
        # Events stored after a salvage take the seqs the lost ones had: no cursor may
        # stand beyond the log's end, or it would pass over them.
        new.execute(
            "UPDATE outbox_sinks"
            " SET cursor = min(cursor, (SELECT coalesce(max(seq), 0) FROM events))"
        )
        if outbox_damaged and report.copied.get("events"):
            # Re-sending is safe (the remote stores each event once by its event_id), losing
            # is not: every event not dead-lettered for a sink nor held is queued again.
            new.execute(
                "INSERT OR IGNORE INTO outbox (sink, seq, bytes)"  # noqa: S608 (a constant)
                f" SELECT s.id, e.seq, {BODY_BYTES} FROM outbox_sinks AS s, events AS e"
                " WHERE s.enabled AND e.seq <= s.cursor AND NOT EXISTS"
                " (SELECT 1 FROM outbox_dead AS d WHERE d.sink = s.id AND d.seq = e.seq)"
                " AND e.seq NOT IN (SELECT seq FROM outbox_held) ORDER BY s.id, e.seq"
            )
        # An entry whose event was lost can never be sent (its loss is counted below): it
        # would hold the outbox's depth above zero for good.
        new.execute("DELETE FROM outbox WHERE seq NOT IN (SELECT seq FROM events)")
        new.execute("DELETE FROM outbox_dead WHERE seq NOT IN (SELECT seq FROM events)")
        new.execute("DELETE FROM outbox_held WHERE seq NOT IN (SELECT seq FROM events)")
        recount(new)  # the copied (or rebuilt) entries
        recount_held(new)
        new.execute(
            "UPDATE outbox_totals SET quarantined = ? WHERE id = 1",
            (quarantined + report.lost_events,),
        )


def _record(path: Path, report: SalvageReport, started: float) -> None:
    report.seconds = round(time.monotonic() - started, 3)
    conn = connect(path)
    try:
        with transaction(conn):
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (SALVAGE_META_KEY, json.dumps(asdict(report), ensure_ascii=False)),
            )
            if report.moved_to is None or not report.copied:
                # Nothing was copied (the file was missing or empty): the loss is counted
                # here; a copy counted it with the outbox it restored.
                conn.execute(
                    "UPDATE outbox_totals SET quarantined = quarantined + ? WHERE id = 1",
                    (report.lost_events,),
                )
        removed = _removed(conn)
    finally:
        conn.close()
    note_highest_seq(path, report.highest_seq, removed)

"""Opening the workspace database: pragmas, durability level and schema migrations.

Durability contract
-------------------
Every connection that writes runs in WAL mode with ``synchronous=FULL``. In WAL mode that
means SQLite fsyncs the write-ahead log before ``COMMIT`` returns, so a committed event
survives both a killed process *and* a power loss or kernel crash. With ``NORMAL`` a
committed transaction survives a killed process but the last transactions before a power
loss can be rolled back, which would break "accepted means durable". The price is one
fsync per commit (about 0.3 ms on the reference VM; more on some laptops). The store
wins it back with group commit: :class:`~mplp_lsp.store.writer.StoreWriter` merges
concurrent appends into one transaction, so the fsync is paid per group, not per event.

Connections are in autocommit mode (``isolation_level=None``) and every write happens
inside an explicit ``BEGIN IMMEDIATE`` ... ``COMMIT`` (see :func:`transaction`): the
Python module never opens or commits a transaction behind our back, and ``IMMEDIATE``
takes the write lock up front instead of failing half-way with ``SQLITE_BUSY``.

Schema versions live in ``PRAGMA user_version``. :data:`MIGRATIONS` is append-only:
script *n* (1-based) upgrades version *n-1* to *n*, and each script runs in one
transaction together with the version bump, so a failed migration leaves the previous
version intact. Read-only connections never migrate.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

__all__ = [
    "BUSY_TIMEOUT_MS",
    "MIGRATIONS",
    "RECLAIM_MIN_PAGES",
    "SCHEMA_VERSION",
    "WAL_CHECKPOINT_PAGES",
    "WAL_SIZE_LIMIT",
    "StoreVersionError",
    "connect",
    "reclaim_free_pages",
    "register_functions",
    "schema_version",
    "split_script",
    "transaction",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS: Final = 5000
# SQLite checkpoints (copies the WAL back into the database, with its own fsync) after 1000
# pages by default. The event log's unique indexes take random keys, so every commit
# rewrites hundreds of their pages into the WAL; a checkpoint every 32 MiB copies each such
# page back once per many commits instead of every few. The WAL file is cut back to
# WAL_SIZE_LIMIT after each checkpoint, so a burst does not leave a large file behind.
WAL_CHECKPOINT_PAGES: Final = 8192
WAL_SIZE_LIMIT: Final = 4 * 2**20

# Free pages are given back to the file system once there are this many (1 MiB at the
# default page size): after a large drain of the outbox, after a migration that rebuilt a
# table. Fewer are left for SQLite to reuse; reclaiming after every small drain would move
# pages around for nothing.
RECLAIM_MIN_PAGES: Final = 256

_V1: Final = """
-- seq is the rowid: dense, in commit order, and the cursor consumers resume from
-- (after_seq). Not AUTOINCREMENT: that would burn a number on every rejected duplicate.
-- The log is append-only; a future retention policy must never delete the newest row,
-- or its seq would be handed out again.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL UNIQUE,
    kind        TEXT NOT NULL,
    dedup_key   TEXT NOT NULL UNIQUE,
    timestamp   TEXT NOT NULL,
    received_at TEXT NOT NULL,
    body        TEXT NOT NULL
);
CREATE INDEX events_kind_seq ON events (kind, seq);
CREATE INDEX events_timestamp ON events (timestamp);

CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE psg_files (
    path          TEXT PRIMARY KEY,
    last_modified TEXT NOT NULL,
    size          INTEGER,
    mtime_ns      INTEGER,
    content_hash  TEXT,
    updated_seq   INTEGER NOT NULL
);
"""

_TOOL_INVOCATIONS: Final = """
-- The merged state of each tool invocation (graph/tool_invocations.py).
CREATE TABLE tool_invocations (
    invocation_id  TEXT PRIMARY KEY,
    tool_id        TEXT NOT NULL,
    tool_kind      TEXT NOT NULL,
    status         TEXT NOT NULL,
    started_at     TEXT,
    completed_at   TEXT,
    exit_code      INTEGER,
    output_summary TEXT,
    reported_at    TEXT NOT NULL
);
"""

_GIT: Final = """
-- The Git source's last recorded ref state: catch-up compares the repository against it.
CREATE TABLE git_refs (
    ref_name  TEXT PRIMARY KEY,
    object_id TEXT NOT NULL
);

-- PSG commit records (spec 6.3): commit, author and branch nodes; parent, commit->author and
-- commit->branch edges.
CREATE TABLE psg_authors (
    author_id TEXT PRIMARY KEY,
    name      TEXT,
    email     TEXT
);
CREATE TABLE psg_commits (
    commit_id    TEXT PRIMARY KEY,
    author_id    TEXT REFERENCES psg_authors (author_id),
    committed_at TEXT NOT NULL,
    message      TEXT,
    updated_seq  INTEGER NOT NULL
);
-- parent_id has no foreign key: stores from before tag nodes kept parents that are no node.
CREATE TABLE psg_commit_parents (
    commit_id TEXT NOT NULL REFERENCES psg_commits (commit_id) ON DELETE CASCADE,
    position  INTEGER NOT NULL,
    parent_id TEXT NOT NULL,
    PRIMARY KEY (commit_id, position)
);
CREATE INDEX psg_commit_parents_parent ON psg_commit_parents (parent_id);
CREATE TABLE psg_branches (
    ref_name    TEXT PRIMARY KEY,
    head_commit TEXT NOT NULL
);
CREATE TABLE psg_commit_branches (
    commit_id TEXT NOT NULL REFERENCES psg_commits (commit_id) ON DELETE CASCADE,
    ref_name  TEXT NOT NULL REFERENCES psg_branches (ref_name) ON DELETE CASCADE,
    PRIMARY KEY (commit_id, ref_name)
);
CREATE INDEX psg_commit_branches_ref ON psg_commit_branches (ref_name);
"""

# Shared by the outbox's first migration and the event log's rebuild (which drops it with
# the old table): the one definition of "an accepted event is queued".
_OUTBOX_ENQUEUE: Final = """\
CREATE TRIGGER outbox_enqueue AFTER INSERT ON events
WHEN (SELECT enabled FROM outbox_state WHERE id = 1)
BEGIN
    INSERT INTO outbox (seq, bytes) VALUES (NEW.seq, length(CAST(NEW.body AS BLOB)));
END;"""

_OUTBOX: Final = f"""
-- Forwarding outbox (mplp_lsp.forward; docs/forwarding.md). An entry is only the seq of an
-- event: the body stays in the event log, which is kept anyway, so a pending envelope costs
-- a few bytes here. The trigger on events puts the entry into the same transaction as the
-- event, so "accepted" (committed) and "queued for the remote" can never disagree.
CREATE TABLE outbox (
    seq   INTEGER PRIMARY KEY,   -- events.seq: per-store sequence, kept across retries
    bytes INTEGER NOT NULL       -- length of the envelope's JSON, for the disk budget
);

CREATE TABLE outbox_dead (
    seq     INTEGER PRIMARY KEY, -- events.seq of the dead-lettered envelope
    status  INTEGER,             -- the HTTP status that refused it
    reason  TEXT NOT NULL,
    dead_at TEXT NOT NULL
);

-- One row. The counters are kept by the triggers below and by the forwarder in the same
-- transactions as the rows they count, so they never drift from the tables.
CREATE TABLE outbox_state (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    enabled          INTEGER NOT NULL DEFAULT 0,
    budget_bytes     INTEGER NOT NULL DEFAULT 1073741824,
    pending          INTEGER NOT NULL DEFAULT 0,
    pending_bytes    INTEGER NOT NULL DEFAULT 0,
    delivered        INTEGER NOT NULL DEFAULT 0,
    dead_lettered    INTEGER NOT NULL DEFAULT 0,
    overflow_dropped INTEGER NOT NULL DEFAULT 0,
    quarantined      INTEGER NOT NULL DEFAULT 0,
    batches_sent     INTEGER NOT NULL DEFAULT 0,
    failed_attempts  INTEGER NOT NULL DEFAULT 0,
    last_success_at  TEXT,
    last_error       TEXT,
    last_error_at    TEXT
);
INSERT INTO outbox_state (id) VALUES (1);

{_OUTBOX_ENQUEUE}

-- Overflow policy: past the budget the oldest pending entry leaves the outbox (its event
-- stays in the local log) and is counted.
CREATE TRIGGER outbox_added AFTER INSERT ON outbox
BEGIN
    UPDATE outbox_state
       SET pending = pending + 1, pending_bytes = pending_bytes + NEW.bytes
     WHERE id = 1;
    UPDATE outbox_state SET overflow_dropped = overflow_dropped + 1
     WHERE id = 1 AND pending_bytes > budget_bytes;
    DELETE FROM outbox
     WHERE seq = (SELECT min(seq) FROM outbox)
       AND (SELECT pending_bytes > budget_bytes FROM outbox_state WHERE id = 1);
END;

CREATE TRIGGER outbox_removed AFTER DELETE ON outbox
BEGIN
    UPDATE outbox_state
       SET pending = pending - 1, pending_bytes = pending_bytes - OLD.bytes
     WHERE id = 1;
END;
"""  # noqa: S608 (only a constant is formatted in)

_DRIFT: Final = """
-- Drift (spec §6.5). The inode joins size and mtime as a stat fact: a file replaced by
-- another with the same size and mtime (cp -p, an atomic rename) is still noticed.
ALTER TABLE psg_files ADD COLUMN inode INTEGER;
CREATE INDEX psg_files_content_hash ON psg_files (content_hash);

-- The recorded content of tracked text files up to a size cap, so "PSG wins" can restore
-- it. Content-addressed: one row per distinct content, deleted once no node references it.
-- Never forwarded and never logged: it is not an event.
CREATE TABLE psg_snapshots (
    content_hash TEXT PRIMARY KEY,
    content      BLOB NOT NULL
);

-- What the last checks found. state 'open' is shown to the user; 'deferred' was put off
-- by the user until the file changes again (the disk facts then differ from these).
CREATE TABLE psg_drift (
    path          TEXT PRIMARY KEY,
    reason        TEXT NOT NULL,
    detected_at   TEXT NOT NULL,
    recorded_at   TEXT,
    disk_size     INTEGER,
    disk_mtime_ns INTEGER,
    disk_inode    INTEGER,
    disk_hash     TEXT,
    note          TEXT,
    state         TEXT NOT NULL DEFAULT 'open'
);
"""

_PSG_NODES: Final = """
-- The project semantic graph's protocol nodes (File nodes are psg_files). One table per node
-- type; ownership and dependency edges are foreign keys, so a dangling reference cannot be
-- stored even by a bug. body: the object as accepted, canonical JSON, minus the parts kept
-- in columns or child rows (status, steps, segments).
CREATE TABLE psg_contexts (
    context_id TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body       TEXT NOT NULL
);

CREATE TABLE psg_plans (
    plan_id    TEXT PRIMARY KEY,
    context_id TEXT NOT NULL REFERENCES psg_contexts (context_id),
    status     TEXT NOT NULL,
    status_at  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body       TEXT NOT NULL
);
CREATE INDEX psg_plans_context ON psg_plans (context_id);

CREATE TABLE psg_steps (
    step_id   TEXT PRIMARY KEY,
    plan_id   TEXT NOT NULL REFERENCES psg_plans (plan_id),
    position  INTEGER NOT NULL,
    status    TEXT NOT NULL,
    status_at TEXT NOT NULL,
    body      TEXT NOT NULL,
    UNIQUE (plan_id, position)
);

CREATE TABLE psg_step_dependencies (
    step_id    TEXT NOT NULL REFERENCES psg_steps (step_id),
    depends_on TEXT NOT NULL REFERENCES psg_steps (step_id),
    PRIMARY KEY (step_id, depends_on)
) WITHOUT ROWID;
CREATE INDEX psg_step_dependencies_target ON psg_step_dependencies (depends_on);

CREATE TABLE psg_confirms (
    confirm_id  TEXT PRIMARY KEY,
    target_type TEXT NOT NULL,
    target_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    body        TEXT NOT NULL
);
CREATE INDEX psg_confirms_target ON psg_confirms (target_id);

CREATE TABLE psg_traces (
    trace_id   TEXT PRIMARY KEY,
    context_id TEXT NOT NULL REFERENCES psg_contexts (context_id),
    plan_id    TEXT REFERENCES psg_plans (plan_id),
    status     TEXT NOT NULL,
    body       TEXT NOT NULL
);

CREATE TABLE psg_trace_segments (
    segment_id        TEXT PRIMARY KEY,
    trace_id          TEXT NOT NULL REFERENCES psg_traces (trace_id),
    parent_segment_id TEXT REFERENCES psg_trace_segments (segment_id),
    position          INTEGER NOT NULL,
    body              TEXT NOT NULL,
    UNIQUE (trace_id, position)
);
-- Trace segments are immutable once created (spec 2.3): the store itself refuses.
CREATE TRIGGER psg_trace_segments_no_update BEFORE UPDATE ON psg_trace_segments
BEGIN SELECT RAISE(ABORT, 'trace segments are append-only'); END;
CREATE TRIGGER psg_trace_segments_no_delete BEFORE DELETE ON psg_trace_segments
BEGIN SELECT RAISE(ABORT, 'trace segments are append-only'); END;

-- One CI pipeline run; node_id is the pipeline_id of its pipeline_stage events.
CREATE TABLE psg_pipelines (
    node_id        TEXT PRIMARY KEY,
    ci_provider    TEXT NOT NULL,
    pipeline_id    TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    status         TEXT NOT NULL,
    status_at      TEXT NOT NULL,
    branch_name    TEXT,
    commit_id      TEXT,
    cause_event_id TEXT NOT NULL,
    UNIQUE (ci_provider, pipeline_id, run_id)
);

-- Events a PSG change produced, written in the change's own transaction and removed once the
-- intake has stored them: a crash in between loses none (they are resubmitted at start-up).
CREATE TABLE psg_outbox (
    event_id TEXT PRIMARY KEY,
    kind     TEXT NOT NULL,
    body     TEXT NOT NULL
);
"""

_COMPACT_DEDUP_KEYS: Final = """
-- Dedup keys that are 128-bit hashes in hex (the intake's form) are kept as their 16 bytes
-- (mplp_lsp.store.events.dedup_param). The unique index on them is the event log's biggest
-- write cost: the keys are random, so each event dirties its own index page, and every
-- dirty page is written to the WAL and fsynced at commit. Half-size entries mean half the
-- pages. Other keys stay text; SQLite never finds a blob equal to a text value, so the two
-- forms cannot collide. mplp_hex_key is registered by connect().
UPDATE events SET dedup_key = mplp_hex_key(dedup_key) WHERE typeof(dedup_key) = 'text';
"""

_TIMED_KEYS: Final = f"""
-- The event log rebuilt so that an append touches few index pages (mplp_lsp.store.dedup):
-- * dedup keys lead with the event's own time; mplp_current_key (registered by connect())
--   rewrites every older form, so old events still catch their duplicates;
-- * event_id is unique among the ids received from outside (minted = 0). An id the daemon
--   mints itself is a UUID v4 from the OS's random source: unique without an index, and
--   a unique index on random ids cost a page write per event. Rows from before are all
--   treated as received, so their ids stay checked.
CREATE TABLE events_v8 (
    seq         INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL,
    kind        TEXT NOT NULL,
    dedup_key   BLOB NOT NULL UNIQUE,
    timestamp   TEXT NOT NULL,
    received_at TEXT NOT NULL,
    body        TEXT NOT NULL,
    minted      INTEGER NOT NULL DEFAULT 0   -- 1: event_id was minted by this daemon
);
INSERT INTO events_v8 (seq, event_id, kind, dedup_key, timestamp, received_at, body)
    SELECT seq, event_id, kind, mplp_current_key(dedup_key, body), timestamp, received_at, body
      FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_v8 RENAME TO events;
CREATE UNIQUE INDEX events_received_id ON events (event_id) WHERE minted = 0;
CREATE INDEX events_kind_seq ON events (kind, seq);
CREATE INDEX events_timestamp ON events (timestamp);
{_OUTBOX_ENQUEUE}

-- The overflow policy runs only when the budget is exceeded: checked on the counter's own
-- update (NEW is at hand) instead of by two extra statements per queued event.
DROP TRIGGER outbox_added;
CREATE TRIGGER outbox_added AFTER INSERT ON outbox
BEGIN
    UPDATE outbox_state
       SET pending = pending + 1, pending_bytes = pending_bytes + NEW.bytes
     WHERE id = 1;
END;
CREATE TRIGGER outbox_overflow AFTER UPDATE OF pending_bytes ON outbox_state
WHEN NEW.pending_bytes > NEW.budget_bytes
BEGIN
    UPDATE outbox_state SET overflow_dropped = overflow_dropped + 1 WHERE id = 1;
    DELETE FROM outbox WHERE seq = (SELECT min(seq) FROM outbox);
END;
"""  # noqa: S608 (only a constant is formatted in)

_QUEUE_PER_APPEND: Final = """
-- Accepted events are queued by the append itself, one statement per batch, with the
-- overflow policy applied by the same code (mplp_lsp.store.queueing): the triggers that
-- queued and counted each event cost a third of an append. outbox_removed still counts
-- what leaves.
DROP TRIGGER outbox_enqueue;
DROP TRIGGER outbox_added;
DROP TRIGGER outbox_overflow;
"""

_IDENTITY_KEYS: Final = """
-- Tool and git events are keyed by what identifies them, no longer by the whole payload
-- (mplp_lsp.store.dedup.identity): a tool invocation's state re-sent with another time
-- zone spelling is the same event; a commit seen on two branches is one commit. Rows
-- that are now duplicates of an earlier one keep their old key (OR IGNORE): nothing
-- stored is dropped, and later submissions meet the first one's key.
UPDATE OR IGNORE events SET dedup_key = mplp_event_key(kind, body) WHERE kind IN ('tool', 'git')
   AND mplp_event_key(kind, body) IS NOT NULL;
"""

_CONSUMER_FLOOR: Final = """
-- Bus consumers keep their position in meta (mplp_lsp.store.positions); in a store that has
-- events already, they start where the log ends now: its graph was derived from them.
INSERT OR IGNORE INTO meta (key, value)
    SELECT 'consumers.floor', CAST(coalesce(max(seq), 0) AS TEXT) FROM events;
"""

_PENDING_GRAPH_EVENTS: Final = """
-- psg_outbox was one of three things called "outbox"; these rows are graph events waiting for
-- the intake (mplp_lsp.graph.pending). Renamed in place: pending rows are kept.
ALTER TABLE psg_outbox RENAME TO psg_pending_events;
"""

_TIMELINE: Final = """
-- The dashboard's timeline (mplp_lsp.ui.timeline). Events counted per hour and kind, so a
-- view of months reads a few thousand rows whatever the log holds; the count is brought up
-- to date from the log (seq > timeline.rolled_seq) when the timeline is read. Views finer
-- than an hour count the events themselves: with the kind in the time index, that reads
-- the index alone, never the rows; it still serves every "since" query the old one did.
DROP INDEX events_timestamp;
CREATE INDEX events_timestamp_kind ON events (timestamp, kind);
CREATE TABLE timeline_hours (
    hour  TEXT NOT NULL,      -- the first 13 characters of the canonical timestamp
    kind  TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (hour, kind)
) WITHOUT ROWID;
INSERT INTO timeline_hours (hour, kind, count)
    SELECT substr(timestamp, 1, 13), kind, count(*) FROM events GROUP BY 1, 2;
INSERT OR REPLACE INTO meta (key, value)
    SELECT 'timeline.rolled_seq', CAST(coalesce(max(seq), 0) AS TEXT) FROM events;
"""

_GIT_TAGS: Final = """
-- PSG tag nodes (graph/commits.py): a tag names a commit node, as every reference does.
CREATE TABLE psg_tags (
    ref_name  TEXT PRIMARY KEY,
    commit_id TEXT NOT NULL REFERENCES psg_commits (commit_id),
    tagged_at TEXT NOT NULL
);
CREATE INDEX psg_tags_commit ON psg_tags (commit_id);
"""

# The event's own time, computed by SQLite from the stored envelope (mplp_lsp.store.paging):
# the payload's instant where it has a readable one (a file change's or a commit's timestamp;
# a tool or CI run's end, else its start), else the envelope's timestamp.
_INSTANT: Final = "strftime('%Y-%m-%dT%H:%M:%fZ', json_extract(body, '$.payload.{}'))"
_OCCURRED_AT: Final = (
    "coalesce(CASE WHEN kind IN ('file_update', 'git', 'tool', 'ci') AND json_valid(body)"
    f" THEN coalesce({_INSTANT.format('timestamp')}, {_INSTANT.format('completed_at')},"
    f" {_INSTANT.format('started_at')}) END, timestamp)"
)

_EVENT_TIME: Final = f"""
-- Events in the order they happened (spec §6.4.2: "Order is not assumed; reconstruct the
-- timeline from timestamps"). A CI run is reported when it ends, a commit handed over after a
-- rebase, a script emits what happened yesterday: arrival order is not event order.
-- occurred_at is the event's own time, received_at stays the time of arrival. A generated
-- column: SQLite computes it from the body, so it never disagrees with the envelope, any
-- SQLite client reads it, and this upgrade builds one index instead of rewriting the log.
-- The index carries seq (a page in time order resumes after the last (occurred_at, seq) it
-- returned, reading only its own rows) and kind (the timeline counts from the index alone).
DROP INDEX events_timestamp_kind;
ALTER TABLE events ADD COLUMN occurred_at TEXT GENERATED ALWAYS AS ({_OCCURRED_AT}) VIRTUAL;
CREATE INDEX events_time ON events (occurred_at, seq, kind);
DELETE FROM timeline_hours;
INSERT INTO timeline_hours (hour, kind, count)
    SELECT substr(occurred_at, 1, 13), kind, count(*) FROM events GROUP BY 1, 2;
INSERT OR REPLACE INTO meta (key, value)
    SELECT 'timeline.rolled_seq', CAST(coalesce(max(seq), 0) AS TEXT) FROM events;
"""  # noqa: S608 (only constants are formatted in)

_SNAPSHOT_CODEC: Final = """
-- File snapshots are compressed after they are recorded (mplp_lsp.graph.snapshots):
-- codec NULL is the content as read, waiting for the owner's compaction; 'zlib' compressed;
-- 'raw' kept as read for good (it does not compress). A burst of saves never waits for it.
ALTER TABLE psg_snapshots ADD COLUMN codec TEXT;
"""

_HELD_FOR_REMOTE: Final = """
-- Envelopes queued for a remote other than the one configured now (mplp_lsp.forward.held):
-- not sent, not under the disk budget, never dropped by retention; they go back into the
-- outbox when their remote is configured again, or when the user requeues them
-- (`mplp-lsp outbox requeue --held`). The outbox itself is the queue of the remote named in
-- meta 'forward.remote'; a store upgraded to this version names none yet, and its queue
-- goes to the first remote configured after the upgrade.
CREATE TABLE outbox_held (
    seq     INTEGER PRIMARY KEY,  -- events.seq
    remote  TEXT NOT NULL,        -- the remote it was queued for: scheme://host[:port]/path
    bytes   INTEGER NOT NULL,     -- length of the envelope's JSON, as in the outbox
    held_at TEXT NOT NULL
);
CREATE INDEX outbox_held_remote ON outbox_held (remote, seq);
"""

_SINKS: Final = """
-- One outbox for every sink (mplp_lsp.forward.sinks; docs/forwarding.md#sinks). A sink's
-- pending envelopes are the events after its cursor (while it is enabled) and its rows in
-- outbox: an accepted event costs a counter update per sink, no row. Rows are what is
-- pending out of order: requeued dead letters, envelopes released from outbox_held, and
-- every entry this migration finds, for the one sink the store had, the collector remote it
-- was queued for (meta 'forward.remote', which moves into the sink's row).
CREATE TABLE outbox_sinks (
    id               INTEGER PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,  -- 'collector', 'otlp', or a remotes entry's name
    remote           TEXT,                  -- the remote its queue is for (forward.held)
    enabled          INTEGER NOT NULL DEFAULT 0,
    cursor           INTEGER NOT NULL DEFAULT 0, -- events.seq; every later event is pending
    budget_bytes     INTEGER NOT NULL DEFAULT 1073741824,
    pending          INTEGER NOT NULL DEFAULT 0,
    pending_bytes    INTEGER NOT NULL DEFAULT 0,
    delivered        INTEGER NOT NULL DEFAULT 0,
    dead_lettered    INTEGER NOT NULL DEFAULT 0,
    rejected         INTEGER NOT NULL DEFAULT 0, -- acknowledged, but refused by the receiver
    overflow_dropped INTEGER NOT NULL DEFAULT 0,
    batches_sent     INTEGER NOT NULL DEFAULT 0,
    failed_attempts  INTEGER NOT NULL DEFAULT 0,
    last_success_at  TEXT,
    last_error       TEXT,
    last_error_at    TEXT
);
INSERT INTO outbox_sinks (id, name, remote, enabled, cursor, budget_bytes, pending,
        pending_bytes, delivered, dead_lettered, overflow_dropped, batches_sent,
        failed_attempts, last_success_at, last_error, last_error_at)
    SELECT 1, 'collector', (SELECT value FROM meta WHERE key = 'forward.remote'), enabled,
           (SELECT coalesce(max(seq), 0) FROM events), budget_bytes, pending, pending_bytes,
           delivered, dead_lettered, overflow_dropped, batches_sent, failed_attempts,
           last_success_at, last_error, last_error_at
      FROM outbox_state WHERE id = 1;
DELETE FROM meta WHERE key = 'forward.remote';

DROP TRIGGER outbox_removed;
-- sink 1 is the collector's, made first by this migration: an older store's rows that a
-- salvage copies (they have no sink) are the collector's, as they were.
CREATE TABLE outbox_rows (
    sink  INTEGER NOT NULL DEFAULT 1 REFERENCES outbox_sinks (id),
    seq   INTEGER NOT NULL,      -- events.seq, at or before the sink's cursor
    bytes INTEGER NOT NULL,      -- length of the envelope's JSON, for the disk budget
    PRIMARY KEY (sink, seq)
);
INSERT INTO outbox_rows (sink, seq, bytes) SELECT 1, seq, bytes FROM outbox ORDER BY seq;
DROP TABLE outbox;
ALTER TABLE outbox_rows RENAME TO outbox;
CREATE INDEX outbox_seq ON outbox (seq);

CREATE TABLE outbox_dead_sinks (
    sink    INTEGER NOT NULL DEFAULT 1 REFERENCES outbox_sinks (id),
    seq     INTEGER NOT NULL,    -- events.seq of the dead-lettered envelope
    status  INTEGER,             -- the HTTP status that refused it
    reason  TEXT NOT NULL,
    dead_at TEXT NOT NULL,
    PRIMARY KEY (sink, seq)
);
INSERT INTO outbox_dead_sinks (sink, seq, status, reason, dead_at)
    SELECT 1, seq, status, reason, dead_at FROM outbox_dead ORDER BY seq;
DROP TABLE outbox_dead;
ALTER TABLE outbox_dead_sinks RENAME TO outbox_dead;
CREATE INDEX outbox_dead_seq ON outbox_dead (seq);

-- A seq may now be held for two remotes (two sinks changed their remote).
CREATE TABLE outbox_held_remotes (
    remote  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    bytes   INTEGER NOT NULL,
    held_at TEXT NOT NULL,
    PRIMARY KEY (remote, seq)
);
INSERT INTO outbox_held_remotes (remote, seq, bytes, held_at)
    SELECT remote, seq, bytes, held_at FROM outbox_held ORDER BY remote, seq;
DROP TABLE outbox_held;
ALTER TABLE outbox_held_remotes RENAME TO outbox_held;
CREATE INDEX outbox_held_seq ON outbox_held (seq);

-- What stays store-wide: envelopes lost to a damaged file, whichever sink they were for.
CREATE TABLE outbox_totals (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    quarantined INTEGER NOT NULL DEFAULT 0
);
INSERT INTO outbox_totals (id, quarantined) SELECT 1, quarantined FROM outbox_state WHERE id = 1;
DROP TABLE outbox_state;
"""

_EVENT_COUNTS: Final = """
-- What status reports at every request (the editors ask twice a second while recording): the
-- events per kind, and those received today. Counting the log itself grew with it (35 ms at
-- 20,000 events, a full scan of the table for "today"); these counts follow each insert and
-- delete instead, per day of arrival (received_at's UTC date) and kind.
CREATE TABLE event_counts (
    day   TEXT NOT NULL,
    kind  TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (day, kind)
) WITHOUT ROWID;
INSERT INTO event_counts (day, kind, count)
    SELECT substr(received_at, 1, 10), kind, count(*) FROM events GROUP BY 1, 2;
CREATE TRIGGER event_counted AFTER INSERT ON events BEGIN
    INSERT INTO event_counts (day, kind, count)
        VALUES (substr(NEW.received_at, 1, 10), NEW.kind, 1)
        ON CONFLICT (day, kind) DO UPDATE SET count = count + 1;
END;
CREATE TRIGGER event_uncounted AFTER DELETE ON events BEGIN
    UPDATE event_counts SET count = count - 1
        WHERE day = substr(OLD.received_at, 1, 10) AND kind = OLD.kind;
END;
"""

MIGRATIONS: tuple[str, ...] = (
    _V1,
    _TOOL_INVOCATIONS,
    _GIT,
    _OUTBOX,
    _DRIFT,
    _PSG_NODES,
    _COMPACT_DEDUP_KEYS,
    _TIMED_KEYS,
    _QUEUE_PER_APPEND,
    _IDENTITY_KEYS,
    _CONSUMER_FLOOR,
    _PENDING_GRAPH_EVENTS,
    _TIMELINE,
    _GIT_TAGS,
    _EVENT_TIME,
    _SNAPSHOT_CODEC,
    _HELD_FOR_REMOTE,
    _SINKS,
    _EVENT_COUNTS,
)
"""Schema scripts; index ``i`` upgrades ``user_version`` ``i`` to ``i + 1``. Append only."""

SCHEMA_VERSION: Final = len(MIGRATIONS)


class StoreVersionError(RuntimeError):
    """The database was written by a newer mplp-lsp whose schema this one does not know."""


class StoreError(sqlite3.DatabaseError):
    """A store that cannot be opened, said with its path and what to do (an
    ``sqlite3.DatabaseError``, so every handler of SQLite's own errors handles it too)."""


def connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """Open the store at ``path``, creating and migrating it unless ``read_only``.

    The connection is bound to the calling thread (SQLite objects stay on one thread;
    :class:`~mplp_lsp.store.writer.StoreWriter` opens its connection on its own thread).
    Raises :class:`StoreError` when the file cannot be used as a store.
    """
    try:
        return _connect_read_only(path) if read_only else _connect(path)
    except sqlite3.DatabaseError as error:
        said = _unusable(path, str(error))
        if said is None or isinstance(error, StoreError):
            raise
        raise StoreError(said) from error


def _unusable(path: Path, reason: str) -> str | None:
    """What to tell the user of a file that cannot be opened as a store, by SQLite's reason;
    None for any other error (a failed migration says what it is itself)."""
    if "not a database" in reason:
        return (
            f"{path} is not an mplp-lsp store (another program's file, or damaged): move it "
            "aside, or choose another state dir (--state-dir, the stateDir setting)"
        )
    if "unable to open" in reason:
        return f"cannot open the store {path}: check that its folder exists and is writable"
    if "readonly" in reason:
        return f"the store {path} is read-only here: a command that writes needs write access"
    return None


def _connect(path: Path) -> sqlite3.Connection:
    make_private(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if _is_empty(conn):
            # Only effective before the first table exists; later it would need a VACUUM.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not switch {path} to WAL (got {mode!r})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        # SQLite's default page cache (2 MiB) stays: a larger one sped up 100k-event bulk
        # appends, but a daemon's cache fills as its store grows, and an hour at 10 events/s
        # then grew its memory by 16 MiB (bench/soak_watch.py).
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        register_functions(conn)
        if _migrate(conn, path):
            reclaim_free_pages(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def make_private(path: Path) -> None:
    """Create ``path`` (a SQLite database) mode 0600, or tighten it to 0600, whatever the
    umask and the folder's mode: it holds content snapshots. SQLite gives the ``-wal`` and
    ``-shm`` files it creates the database file's mode; ones left by an older run are
    tightened here too."""
    _tighten(str(path), os.O_CREAT)
    for suffix in ("-wal", "-shm", "-journal"):
        with suppress(FileNotFoundError):
            _tighten(f"{path}{suffix}", 0)


def _tighten(name: str, create: int) -> None:
    fd = os.open(name, os.O_WRONLY | create | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        # Another user's file stays theirs to read whatever its mode (root could chmod it).
        owner = os.fstat(fd).st_uid
        if hasattr(os, "geteuid") and owner != os.geteuid():
            raise PermissionError(errno.EPERM, f"it belongs to uid {owner}, not to you", name)
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def register_functions(conn: sqlite3.Connection) -> None:
    """The SQL functions the migration scripts (and salvage) call."""
    # Imported here: a read-only connection registers none (``events`` starts without it).
    from mplp_lsp.store.dedup import current_key, dedup_param, stored_event_key

    conn.create_function("mplp_hex_key", 1, dedup_param, deterministic=True)
    conn.create_function("mplp_current_key", 2, current_key, deterministic=True)
    conn.create_function("mplp_event_key", 2, stored_event_key, deterministic=True)


def _connect_read_only(path: Path) -> sqlite3.Connection:
    # mode=ro would also fail on a missing file, but with SQLite's vague "unable to open".
    if not path.is_file():
        raise FileNotFoundError(f"no store at {path}")
    uri = path.resolve().as_uri()
    try:
        conn = _open_read_only(f"{uri}?mode=ro")
    except sqlite3.OperationalError:
        # A store in WAL mode whose folder cannot be written (a read-only disk, another user's
        # folder) cannot get its shared-memory file: read it as an immutable file instead,
        # which is what it is as long as nobody can write there.
        if os.access(path.parent, os.W_OK):
            raise
        conn = _open_read_only(f"{uri}?immutable=1")
    return conn


def _open_read_only(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # opens the file now, not later
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def meta_value(conn: sqlite3.Connection, key: str) -> str | None:
    """The store's ``meta`` entry ``key``, or None. Here, beside the schema, so a reader that
    wants one entry (the recorded editor settings) does not load the event log's module."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _is_empty(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None


def reclaim_free_pages(conn: sqlite3.Connection, *, min_pages: int = RECLAIM_MIN_PAGES) -> int:
    """Give the file's free pages back to the file system; returns how many were free.

    The store runs with ``auto_vacuum = INCREMENTAL``: pages freed by deletes stay in the
    file (SQLite keeps its high-water mark) until this is asked for. Nothing is done below
    ``min_pages`` or inside an open transaction. The WAL is checkpointed (passively) so
    the database file itself shrinks now rather than at the next automatic checkpoint.
    """
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    if free < max(min_pages, 1) or conn.in_transaction:
        return 0
    # executescript steps the pragma to completion; execute() would free a single page.
    conn.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(PASSIVE);")
    return free


def _migrate(conn: sqlite3.Connection, path: Path) -> bool:
    """Bring the schema up to date; returns whether any migration ran."""
    target = len(MIGRATIONS)
    current = schema_version(conn)
    if current > target:
        raise StoreVersionError(
            f"{path} has schema version {current}; this mplp-lsp knows up to {target}"
        )
    if 0 < current < target:
        # Some upgrades rewrite the whole event log (about 10 s per million events): say why
        # this start is slow.
        log.warning("upgrading the store %s from schema %d to %d", path, current, target)
    migrated = False
    while current < target:
        with transaction(conn):
            # Re-read under the write lock: another process may have migrated meanwhile.
            current = schema_version(conn)
            if current >= target:
                break
            for statement in split_script(MIGRATIONS[current]):
                conn.execute(statement)
            current += 1
            conn.execute(f"PRAGMA user_version = {current}")
            migrated = True
    return migrated


def split_script(script: str) -> list[str]:
    """Split an SQL script into statements.

    ``executescript`` cannot be used inside our own transaction (it commits any open
    transaction first), so each statement is executed on its own. ``complete_statement``
    is SQLite's own tokenizer check, so ``;`` inside strings, comments and trigger bodies
    does not split a statement.
    """
    statements: list[str] = []
    start = 0
    for index, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start : index + 1]):
            statement = script[start : index + 1].strip()
            if _has_code(statement):
                statements.append(statement)
            start = index + 1
    if _has_code(script[start:]):
        raise ValueError(f"incomplete SQL statement at the end of a script: {script[start:]!r}")
    return statements


def _has_code(text: str) -> bool:
    lines = (line.split("--", 1)[0].strip() for line in text.splitlines())
    return any(line and line != ";" for line in lines)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or join the transaction already open.

    On an exception the transaction is rolled back (only if this block opened it; a joined
    block leaves that to its owner) and the exception propagates. If ``COMMIT`` itself fails
    (disk full, I/O error), the transaction is rolled back as well, so nothing is left
    half-committed and the connection is usable again.
    """
    joined = conn.in_transaction
    if joined:
        yield conn
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            # A failing ROLLBACK must not hide the error that caused it.
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise

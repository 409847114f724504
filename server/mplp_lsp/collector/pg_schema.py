"""The PostgreSQL collector's schema: numbered migrations, applied at start under a lock.

Each migration runs once, in order, and its number is recorded in ``collector_migrations``.
All pending migrations run in one transaction that first takes a transaction-level advisory
lock, so two instances starting together apply them once: the second waits, then finds
nothing left to do. PostgreSQL's DDL is transactional, so a failed migration leaves the
schema as it was.

Keys are chosen so that inserts stay cheap as the tables grow. The dedup key of a stored
envelope is ``(stream, occurred_at, event_id)``: a stream (one forwarding store) sends its
events roughly in time order, so each new key lands at the right edge of its stream's part
of the index instead of on a random page (a key led by the random ``event_id`` touches a
random leaf per row once the index outgrows memory). ``occurred_at`` is the envelope's own
timestamp, the same on every retry, so a re-sent envelope meets its first copy. The other
indexes end in the paging order ``(txid, id)`` (migration 2), which also only grows.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "migrate"]

# A fixed key for pg_advisory_xact_lock: "mplp" "coll" as two 32-bit halves.
_LOCK_KEY: Final = 0x6D706C70_636F6C6C

MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: raw events, answered Idempotency-Keys, streams, and the team project graph.
    """
    CREATE TABLE events (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        stream      text NOT NULL,
        seq         bigint NOT NULL,
        source      text NOT NULL,
        event_id    text NOT NULL,
        kind        text NOT NULL,
        author      text,
        occurred_at timestamptz NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        body        text NOT NULL,
        UNIQUE (stream, occurred_at, event_id)
    );
    CREATE INDEX events_by_stream ON events (stream, id);
    CREATE INDEX events_by_kind ON events (kind, id);
    CREATE INDEX events_by_author ON events (author, id) WHERE author IS NOT NULL;
    CREATE INDEX events_by_time ON events USING brin (occurred_at);

    CREATE TABLE idempotency (
        key       text PRIMARY KEY,
        body_hash text NOT NULL,
        status    integer NOT NULL,
        answer    text NOT NULL,
        at        timestamptz NOT NULL DEFAULT now()
    );

    -- One row per forwarding stream, written by the batch from that stream (one in flight
    -- per stream), so instances never queue behind one hot counter row.
    CREATE TABLE streams (
        stream        text PRIMARY KEY,
        first_contact timestamptz NOT NULL,
        last_contact  timestamptz NOT NULL,
        last_seq      bigint NOT NULL,
        batches       bigint NOT NULL,
        accepted      bigint NOT NULL,
        duplicates    bigint NOT NULL,
        backlog       bigint
    );

    CREATE TABLE team_meta (name text PRIMARY KEY, value text NOT NULL);
    INSERT INTO team_meta VALUES ('graph_id', gen_random_uuid()::text);

    -- The team graph. Every table is a join of the events seen: first/last times take
    -- LEAST/GREATEST, node states are last-writer-wins on (time, event_id), so any order
    -- and any repetition of the same events gives the same rows.
    CREATE TABLE team_repositories (
        repo_url   text PRIMARY KEY,
        first_seen timestamptz NOT NULL,
        last_seen  timestamptz NOT NULL
    );
    CREATE TABLE team_stream_repositories (
        stream   text NOT NULL,
        repo_url text NOT NULL,
        PRIMARY KEY (stream, repo_url)
    );
    CREATE TABLE team_branches (
        repo_url    text NOT NULL,
        ref_name    text NOT NULL,
        present     boolean NOT NULL,
        head_commit text NOT NULL,
        changed_at  timestamptz NOT NULL,
        cause       text NOT NULL,
        PRIMARY KEY (repo_url, ref_name)
    );
    CREATE TABLE team_commits (
        repo_url     text NOT NULL,
        commit_id    text NOT NULL,
        author       text,
        committed_at timestamptz NOT NULL,
        message      text,
        cause        text NOT NULL,
        PRIMARY KEY (repo_url, commit_id)
    );
    CREATE TABLE team_commit_parents (
        repo_url  text NOT NULL,
        commit_id text NOT NULL,
        position  integer NOT NULL,
        parent    text NOT NULL,
        PRIMARY KEY (repo_url, commit_id, position)
    );
    CREATE TABLE team_commit_branches (
        repo_url  text NOT NULL,
        commit_id text NOT NULL,
        ref_name  text NOT NULL,
        PRIMARY KEY (repo_url, commit_id, ref_name)
    );
    CREATE TABLE team_files (
        stream      text NOT NULL,
        path        text NOT NULL,
        present     boolean NOT NULL,
        change_type text NOT NULL,
        modified_at timestamptz NOT NULL,
        cause       text NOT NULL,
        PRIMARY KEY (stream, path)
    );
    CREATE TABLE team_pipeline_runs (
        ci_provider  text NOT NULL,
        pipeline_id  text NOT NULL,
        run_id       text NOT NULL,
        node_id      text NOT NULL,
        stream       text NOT NULL,
        status       text NOT NULL,
        status_rank  integer NOT NULL,
        status_at    timestamptz NOT NULL,
        cause        text NOT NULL,
        first_seen   timestamptz NOT NULL,
        started_at   timestamptz,
        completed_at timestamptz,
        duration_ms  bigint,
        branch_name  text,
        commit_id    text,
        stages       jsonb NOT NULL,
        PRIMARY KEY (ci_provider, pipeline_id, run_id)
    );
    -- What the team runtime emitted (graph_update, pipeline_stage), as the local one does.
    CREATE TABLE team_emitted (
        id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind       text NOT NULL,
        emitted_at timestamptz NOT NULL DEFAULT now(),
        body       text NOT NULL
    );
    """,
    # 2: pages in commit order. ``id`` is drawn at INSERT but becomes visible at COMMIT, so a
    # slower concurrent batch can commit ids below a page already served. Rows now carry
    # their transaction's id (xid8: 64 bits, never wraps) and pages follow (txid, id) up to
    # the oldest transaction still in progress, below which nothing new can appear.
    # Streams keep the backlog's age their forwarder reports beside its depth.
    """
    ALTER TABLE events ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
    ALTER TABLE events DROP CONSTRAINT events_pkey;
    ALTER TABLE events ADD PRIMARY KEY (txid, id);
    DROP INDEX events_by_stream;
    DROP INDEX events_by_kind;
    DROP INDEX events_by_author;
    CREATE INDEX events_by_stream ON events (stream, txid, id);
    CREATE INDEX events_by_kind ON events (kind, txid, id);
    CREATE INDEX events_by_author ON events (author, txid, id) WHERE author IS NOT NULL;
    ALTER TABLE streams ADD COLUMN backlog_oldest timestamptz;
    """,
    # 3: each stream's write key (its hash), bound by the first batch that brings one; a
    # stream written before keys existed has none until its forwarder sends one.
    """
    CREATE TABLE stream_keys (
        stream   text PRIMARY KEY,
        key_hash text NOT NULL,
        bound_at timestamptz NOT NULL DEFAULT now()
    );
    """,
    # 4: an event is stored once per team, whichever stream or instance brings it again (a
    # salvaged store re-sends everything under a new stream). Copies stored before under
    # other streams are removed, the first committed kept; their streams count them as
    # duplicates instead of accepted. Retention goes by receive time (the BRIN index). The
    # streams keep what their forwarders report of themselves; replays are counted per
    # stream; graph nodes whose time was clamped are flagged; dashboard logins are shared
    # by every instance (only hashes of codes, nonces and sessions are kept).
    """
    WITH ranked AS (
        SELECT txid, id, row_number() OVER (PARTITION BY event_id::uuid ORDER BY txid, id) AS copy
        FROM events
    ), removed AS (
        DELETE FROM events e USING ranked r
        WHERE e.txid = r.txid AND e.id = r.id AND r.copy > 1
        RETURNING e.stream
    ), per_stream AS (
        SELECT stream, count(*) AS n FROM removed GROUP BY stream
    )
    UPDATE streams s SET accepted = s.accepted - p.n, duplicates = s.duplicates + p.n
    FROM per_stream p WHERE s.stream = p.stream;
    ALTER TABLE events DROP CONSTRAINT IF EXISTS events_stream_occurred_at_event_id_key;
    CREATE UNIQUE INDEX events_once ON events ((event_id::uuid));
    CREATE INDEX events_by_received ON events USING brin (received_at);

    ALTER TABLE idempotency ADD COLUMN stream text;
    ALTER TABLE streams
        ADD COLUMN backlog_reported_at timestamptz,
        ADD COLUMN replayed bigint NOT NULL DEFAULT 0,
        ADD COLUMN origin text,
        ADD COLUMN machine text,
        ADD COLUMN author text,
        ADD COLUMN replaced_by text,
        ADD COLUMN clock_ahead_ms bigint,
        ADD COLUMN clamped bigint NOT NULL DEFAULT 0;
    CREATE INDEX streams_by_origin ON streams (origin) WHERE origin IS NOT NULL;
    -- A CI run names its commit, not its repository: the DORA keys find the one by the other.
    CREATE INDEX team_commits_by_id ON team_commits (commit_id);

    -- Who a hashed author is, as their commits and workstations name them (team names).
    CREATE TABLE team_people (
        author   text PRIMARY KEY,
        name     text NOT NULL,
        named_at timestamptz NOT NULL
    );
    ALTER TABLE team_branches ADD COLUMN clamped boolean NOT NULL DEFAULT false;
    ALTER TABLE team_commits ADD COLUMN clamped boolean NOT NULL DEFAULT false;
    ALTER TABLE team_files ADD COLUMN clamped boolean NOT NULL DEFAULT false;
    ALTER TABLE team_pipeline_runs ADD COLUMN clamped boolean NOT NULL DEFAULT false;

    CREATE TABLE dashboard_logins (
        hash       text PRIMARY KEY,
        kind       text NOT NULL,
        expires_at timestamptz NOT NULL,
        made_at    timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX dashboard_logins_by_kind ON dashboard_logins (kind, made_at);
    """,
)


async def migrate(conn: AsyncConnection[Any]) -> int:
    """Apply the pending migrations; returns the schema version now in place."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS collector_migrations ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM collector_migrations")
        row = await cursor.fetchone()
        current = int(row[0]) if row else 0
        for version, script in enumerate(MIGRATIONS[current:], start=current + 1):
            await conn.execute(script.encode())
            await conn.execute("INSERT INTO collector_migrations (version) VALUES (%s)", (version,))
    return len(MIGRATIONS) if current < len(MIGRATIONS) else current

"""Recorded content of PSG file nodes, so that "PSG wins" can put a file back (spec §6.5).

Content-addressed and deduplicated: a row per distinct content hash, kept while some file node
records that hash and deleted when the last one moves on. Only text files up to a size cap
are kept (binary or big files are tracked by their facts alone). The content is never
forwarded and never logged: it is not an event. All functions run on the store's writer
thread (or a read connection for :func:`content`).

A snapshot is stored as read and compressed later by the store owner's compaction
(:func:`compress`, zlib: source text shrinks three to five times), so recording a burst of
saves never waits for it. Retention (:func:`prune`) removes the snapshots of files last
recorded before the oldest event the log keeps, never one a drift finding still needs: "PSG
wins" and the three-way merge restore from it.
"""

from __future__ import annotations

import sqlite3
import zlib
from typing import Final

_TEXT_PROBE = 8192  # like Git: a NUL byte in the first 8 KiB makes a file binary


def is_text(data: bytes) -> bool:
    return b"\0" not in data[:_TEXT_PROBE]


def keep(conn: sqlite3.Connection, content_hash: str, data: bytes) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO psg_snapshots(content_hash, content) VALUES (?, ?)",
        (content_hash, data),
    )


def release(conn: sqlite3.Connection, content_hash: str | None) -> None:
    """Drop a snapshot no file node references any more (indexed: O(1), not O(nodes))."""
    if content_hash is None:
        return
    conn.execute(
        "DELETE FROM psg_snapshots WHERE content_hash = ? AND NOT EXISTS "
        "(SELECT 1 FROM psg_files WHERE content_hash = ?)",
        (content_hash, content_hash),
    )


def content(conn: sqlite3.Connection, content_hash: str) -> bytes | None:
    row = conn.execute(
        "SELECT content, codec FROM psg_snapshots WHERE content_hash = ?", (content_hash,)
    ).fetchone()
    if row is None:
        return None
    data, codec = bytes(row[0]), row[1]
    return zlib.decompress(data) if codec == _ZLIB else data


_ZLIB: Final = "zlib"
_RAW: Final = "raw"
_LEVEL: Final = 6  # zlib's default: most of level 9's gain at a fraction of its time


def compress(conn: sqlite3.Connection, limit: int) -> int:
    """Compress up to ``limit`` snapshots stored as read (in the caller's transaction);
    returns how many were looked at. One that would not shrink is kept as it is."""
    rows = conn.execute(
        "SELECT content_hash, content FROM psg_snapshots WHERE codec IS NULL LIMIT ?", (limit,)
    ).fetchall()
    for content_hash, data in rows:
        packed = zlib.compress(bytes(data), _LEVEL)
        if len(packed) < len(data):
            conn.execute(
                "UPDATE psg_snapshots SET content = ?, codec = ? WHERE content_hash = ?",
                (packed, _ZLIB, content_hash),
            )
        else:
            conn.execute(
                "UPDATE psg_snapshots SET codec = ? WHERE content_hash = ?", (_RAW, content_hash)
            )
    return len(rows)


def prune(conn: sqlite3.Connection, below_seq: int) -> int:
    """Remove the snapshots only file nodes recorded before ``below_seq`` refer to, except
    those of a file with a drift finding (open or deferred); returns how many."""
    return conn.execute(
        "DELETE FROM psg_snapshots WHERE content_hash IN ("
        " SELECT content_hash FROM psg_files WHERE updated_seq < ? AND content_hash IS NOT NULL)"
        " AND NOT EXISTS (SELECT 1 FROM psg_files AS f"
        "  WHERE f.content_hash = psg_snapshots.content_hash"
        "  AND (f.updated_seq >= ? OR f.path IN (SELECT path FROM psg_drift)))",
        (below_seq, below_seq),
    ).rowcount


def totals(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(snapshots, bytes stored, snapshots not yet compressed)."""
    count, size, waiting = conn.execute(
        "SELECT count(*), coalesce(sum(length(content)), 0), count(*) - count(codec)"
        " FROM psg_snapshots"
    ).fetchone()
    return int(count), int(size), int(waiting)

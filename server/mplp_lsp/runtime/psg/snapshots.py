"""Recorded content of PSG file nodes, so that "PSG wins" can put a file back (spec §6.5).

Content-addressed and deduplicated: a row per distinct content hash, kept while some file node
records that hash and deleted when the last one moves on. Only text files up to a size cap
are kept (binary or big files are tracked by their facts alone). The content is never
forwarded and never logged: it is not an event. All functions run on the store's writer
thread (or a read connection for :func:`content`).
"""

from __future__ import annotations

import sqlite3

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
        "SELECT content FROM psg_snapshots WHERE content_hash = ?", (content_hash,)
    ).fetchone()
    return None if row is None else bytes(row[0])

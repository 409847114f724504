"""Talking to a real team collector (PostgreSQL): batches posted, pages read, rows counted."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import psycopg

from mplp_lsp.collector.pg_store import PgCollector
from mplp_lsp.forward.outbox import STREAM_META_KEY
from mplp_lsp.protocol.envelope import build_envelope
from mplp_lsp.protocol.kinds import Kind
from tests import postgres
from tests.conftest import sample
from tests.team.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def envelope(kind: Kind, fixture: str, **payload: Any) -> dict[str, Any]:
    return build_envelope(kind, {**sample(fixture), **payload}, source_module="test")


def batch(stream: str, envelopes: list[dict[str, Any]], first_seq: int = 1) -> bytes:
    items = [{"seq": first_seq + i, "envelope": e} for i, e in enumerate(envelopes)]
    return json.dumps({"source": stream, "items": items}).encode()


async def post(url: str, body: bytes, **headers: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/events", data=body, headers={**AUTH, **headers}) as r,
    ):
        return r.status, await r.json()


async def get(url: str, path: str, token: str = TOKEN) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{url}{path}", headers={"Authorization": f"Bearer {token}"}) as r,
    ):
        return r.status, await r.json(content_type=None)


def count(cluster: postgres.Cluster, db_url: str, sql: str) -> int:
    database = db_url.rsplit("/", 1)[1]
    with psycopg.connect(cluster.psql_url(database)) as conn:
        row = conn.execute(sql.encode()).fetchone()
    assert row is not None
    return int(row[0])


def stream_of(state: Path) -> str | None:
    """The store's forwarding stream; None before forwarding made one."""
    conn = sqlite3.connect(state / "events.db")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (STREAM_META_KEY,)).fetchone()
    finally:
        conn.close()
    return None if row is None else str(row[0])


async def deliver(url: str, batches: list[tuple[str, list[dict[str, Any]]]]) -> None:
    collector = await PgCollector.open(url, password=postgres.PASSWORD, max_connections=2)
    try:
        for stream, items in batches:
            body = json.dumps(
                {"source": stream, "items": [{"seq": 1, "envelope": e} for e in items]}
            ).encode()
            answer = await collector.receive(body, None)
            assert answer.status == 200, answer.body
    finally:
        await collector.close()

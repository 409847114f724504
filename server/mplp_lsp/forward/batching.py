"""Turning outbox entries into one request body, and splitting a refused batch.

The body is assembled from the stored JSON text without parsing it again: each envelope
was serialised once, when it was accepted, and the bytes sent are exactly those bytes.

    {"source": "<stream id>", "items": [{"seq": 17, "envelope": {...}}, ...]}

``source`` names this store's stream and ``seq`` is the envelope's per-stream sequence
number (the event log's ``seq``); both stay the same on every retry, as does the
envelope's ``event_id``. The ``Idempotency-Key`` is a hash of the body, so a retried batch
carries the same key and a different batch never does. The outbox's backlog behind the
batch changes between retries, so it travels in headers (:data:`BACKLOG_HEADER`), outside
the body and its key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mplp_lsp.forward.outbox import Backlog, Entry

__all__ = [
    "BACKLOG_HEADER",
    "BACKLOG_OLDEST_HEADER",
    "IDEMPOTENCY_HEADER",
    "STREAM_KEY_HEADER",
    "Batch",
    "BatchLimits",
    "encode_batch",
    "split",
]

BACKLOG_HEADER: Final = "Mplp-Backlog"
BACKLOG_OLDEST_HEADER: Final = "Mplp-Backlog-Oldest"
# The stream's write key: the remote binds a stream to the first key that writes it.
STREAM_KEY_HEADER: Final = "Mplp-Stream-Key"
IDEMPOTENCY_HEADER: Final = "Idempotency-Key"


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """A batch closes at ``max_count`` envelopes or ``max_bytes`` of JSON; ``linger`` is how
    long a partly filled batch waits for more after the forwarder was idle."""

    max_count: int = 1000
    max_bytes: int = 1_048_576
    linger: float = 0.05

    def __post_init__(self) -> None:
        if self.max_count < 1 or self.max_bytes < 1 or self.linger < 0:
            raise ValueError("need max_count >= 1, max_bytes >= 1 and linger >= 0")


@dataclass(frozen=True, slots=True)
class Batch:
    """One request's worth of entries, encoded by a sink kind (:mod:`.sinks`): the body and
    the headers that go with it besides the transport's own (authorization, user agent)."""

    entries: tuple[Entry, ...]
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    backlog: Backlog | None = None  # reported to the remote with it; None: not reported

    @property
    def seqs(self) -> list[int]:
        return [entry.seq for entry in self.entries]

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get(IDEMPOTENCY_HEADER)


def encode_batch(
    source: str,
    entries: Sequence[Entry],
    backlog: Backlog | None = None,
    *,
    stream_key: str | None = None,
) -> Batch:
    """The collector's body (docs/forwarding.md#delivery) and its headers: its key, the
    stream's write key, and the backlog when known."""
    if not entries:
        raise ValueError("a batch needs at least one entry")
    items = ",".join(f'{{"seq":{entry.seq},"envelope":{entry.body}}}' for entry in entries)
    body = f'{{"source":{json.dumps(source)},"items":[{items}]}}'.encode()
    headers = {
        "Content-Type": "application/json",
        IDEMPOTENCY_HEADER: hashlib.blake2b(body, digest_size=16).hexdigest(),
    }
    if stream_key is not None:
        headers[STREAM_KEY_HEADER] = stream_key
    if backlog is not None:
        headers[BACKLOG_HEADER] = str(backlog.count)
        if backlog.oldest_at is not None:
            headers[BACKLOG_OLDEST_HEADER] = backlog.oldest_at
    return Batch(tuple(entries), body, headers, backlog)


def split(entries: Sequence[Entry]) -> tuple[list[Entry], list[Entry]]:
    """Two halves, in order; the caller sends the first half first (per-source order)."""
    if len(entries) < 2:
        raise ValueError("cannot split fewer than two entries")
    middle = len(entries) // 2
    return list(entries[:middle]), list(entries[middle:])

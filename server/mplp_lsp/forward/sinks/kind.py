"""What a sink kind provides (:class:`SinkKind`) and what its classifier says (:class:`Verdict`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mplp_lsp.forward.batching import Batch
from mplp_lsp.forward.outbox import Backlog, Entry
from mplp_lsp.forward.retry import Action
from mplp_lsp.forward.transport import Reply

__all__ = ["SinkKind", "Stream", "Verdict", "http_reason"]


@dataclass(frozen=True, slots=True)
class Stream:
    """This store's stream: its id (``source``) and its write key (never logged)."""

    id: str
    key: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a batch after its answer.

    ``rejected``: for a delivered batch, how many of its envelopes the receiver said it
    refused without saying which (they cannot be told apart, so the batch is acknowledged
    and the count kept). ``reason``: why, in words, for a log line, a dead letter and
    status.
    """

    action: Action
    reason: str = ""
    rejected: int = 0
    retry_after: str | None = None


class SinkKind(Protocol):
    """One kind of remote (the collector, an OTLP/HTTP logs endpoint, ...)."""

    #: the kind's name, and the name of its sink in the store
    name: str

    def endpoint(self, base_url: str) -> str:
        """Where batches are POSTed, from the configured URL."""
        ...

    def report_endpoint(self, base_url: str) -> str | None:
        """Where the stream's reports go (:mod:`mplp_lsp.forward.report`); None: the
        remote takes none."""
        ...

    def encode(self, stream: Stream, entries: Sequence[Entry], backlog: Backlog | None) -> Batch:
        """``entries`` (at least one, in ``seq`` order) of ``stream`` as one request;
        ``backlog``: what waits behind them (None for a part of a split batch)."""
        ...

    def classify(self, reply: Reply, batch: Batch) -> Verdict:
        """What the remote's answer to ``batch`` means."""
        ...


def http_reason(reply: Reply) -> str:
    """``HTTP 503: busy``: the status and the start of the remote's answer."""
    return f"HTTP {reply.status}: {reply.detail}".rstrip(": ")

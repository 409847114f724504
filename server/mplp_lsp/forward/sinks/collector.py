"""The collector sink: ``mplp-lsp collector serve`` or anything speaking its protocol
(docs/forwarding.md#delivery): batches to ``<url>/events``, the stream's reports to
``<url>/streams/report``, answers classified by status code alone (:func:`.retry.classify`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mplp_lsp.forward.batching import Batch, encode_batch
from mplp_lsp.forward.outbox import COLLECTOR, Backlog, Entry
from mplp_lsp.forward.retry import Action, classify
from mplp_lsp.forward.sinks.kind import Stream, Verdict, http_reason
from mplp_lsp.forward.transport import Reply

__all__ = ["ENDPOINT_PATH", "REPORT_PATH", "CollectorSink"]

ENDPOINT_PATH: Final = "/events"
REPORT_PATH: Final = "/streams/report"


class CollectorSink:
    name = COLLECTOR

    def endpoint(self, base_url: str) -> str:
        return base_url.rstrip("/") + ENDPOINT_PATH

    def report_endpoint(self, base_url: str) -> str | None:
        return base_url.rstrip("/") + REPORT_PATH

    def encode(self, stream: Stream, entries: Sequence[Entry], backlog: Backlog | None) -> Batch:
        return encode_batch(stream.id, entries, backlog, stream_key=stream.key)

    def classify(self, reply: Reply, batch: Batch) -> Verdict:
        action = classify(reply.status, len(batch.entries))
        reason = "" if action is Action.DELIVERED else http_reason(reply)
        return Verdict(action, reason, retry_after=reply.retry_after)

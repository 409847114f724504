"""Sink kinds: what to send a kind of remote, and what its answers mean.

A sink kind (:class:`SinkKind`) is one module: where its requests go below the configured
URL, how entries become one request (the body and its headers), and how an answer is
classified (delivered, in part or whole; retried; split; dead-lettered). The forwarder
(:mod:`mplp_lsp.forward.forwarder`) does the rest the same for every kind: the outbox
cursor, batching, backoff, dead letters, status. CONTRIBUTING.md's sink recipe adds one.
"""

from __future__ import annotations

from mplp_lsp.forward.sinks.kind import SinkKind, Stream, Verdict

__all__ = ["SinkKind", "Stream", "Verdict"]

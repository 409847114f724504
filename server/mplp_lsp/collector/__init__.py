"""The reference remote runtime: receives forwarded batches, validates, deduplicates, stores.

:mod:`.store` is its SQLite database (no HTTP), :mod:`.app` the aiohttp server around it.
``mplp-lsp collector serve`` runs it; docs/forwarding.md describes the protocol.
"""

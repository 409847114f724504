"""The reference remote runtime: receives forwarded batches, validates, deduplicates, stores.

On SQLite (the embedded default): :mod:`.store` is its database (no HTTP), :mod:`.app` the
aiohttp server around it. On PostgreSQL, for a team with several instances (docs/team.md):
:mod:`.pg_schema` its migrations, :mod:`.pg_store` ingest, :mod:`.team_graph` the team
project graph, :mod:`.pg_queries` what the team asks, :mod:`.team_app` the aiohttp server.
:mod:`.serving` runs either server. ``mplp-lsp collector serve`` runs it; docs/forwarding.md
describes the protocol.
"""

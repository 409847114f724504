"""MPLP wire protocol: schemas, validation, invariants and envelopes.

Nothing in here knows about LSP, HTTP or storage.
"""

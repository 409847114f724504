"""MPLP wire protocol: schemas, validation, invariants, typed models and envelopes.

Nothing in here knows about LSP, HTTP or storage.
"""

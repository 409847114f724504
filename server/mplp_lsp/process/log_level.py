"""The process's log level: one call for every logger, and pygls kept quiet.

Its own module, outside :mod:`mplp_lsp.config`: ``serve`` sets its level from its flags
before it answers ``initialize``, and importing the configuration package would read the
settings schema then (:mod:`mplp_lsp.config.live` applies later changes through it).
"""

from __future__ import annotations

import logging

__all__ = ["set_log_level"]


def set_log_level(level: str) -> None:
    """The process's log level (every logger); pygls logs each message at INFO, so it stays
    at WARNING unless debugging."""
    logging.getLogger().setLevel(level.upper())
    logging.getLogger("pygls").setLevel(logging.DEBUG if level == "debug" else logging.WARNING)

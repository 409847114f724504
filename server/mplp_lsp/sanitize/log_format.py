"""The daemon's log format, redacted: no log line carries what an event would not.

Log calls format paths, ref names, exceptions and (at debug level, from pygls and
watchfiles) whole protocol messages and change sets. Rather than trusting every call site,
the one formatter every handler uses redacts the finished line, traceback included, with
every rule of text and the assignments of names, the strictest there are
(:func:`~mplp_lsp.sanitize.redact.redact_line`).
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # Imported at the first line logged, not at start: the rules compile dozens of
        # patterns, and most command runs log nothing.
        from mplp_lsp.sanitize.redact import redact_line

        return redact_line(super().format(record))

"""The integration error log: rejected input, one JSON object per line (spec §7.6).

Invalid integration events are recorded here and never in the event log, so the event
log only ever holds accepted events. This log is diagnostic, not a durability promise: it
is appended without fsync, rotated by size, and a failure to write it must never reach
the caller (spec §7.7: integration failure never stops the editor loop). Failures are
counted in :attr:`IntegrationErrorLog.failures` and logged once per kind of error.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mplp_lsp.protocol.envelope import utc_timestamp

__all__ = ["IntegrationErrorLog"]

log = logging.getLogger(__name__)

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class IntegrationErrorLog:
    """Append-only JSON Lines file with size-based rotation; thread-safe; never raises.

    ``keep`` rotated files are kept beside the live one (``x.jsonl.1`` is the newest).
    """

    def __init__(self, path: Path, *, max_bytes: int = 10 * 2**20, keep: int = 3) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if keep < 0:
            raise ValueError(f"keep must be >= 0, got {keep}")
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self.failures = 0
        self.written = 0
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._warned: set[str] = set()

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``{"time": <now>, **record}`` as one line. Never raises."""
        try:
            line = (
                json.dumps(
                    {"time": utc_timestamp(), **record},
                    ensure_ascii=False,
                    separators=(",", ":"),
                    default=repr,
                )
                + "\n"
            ).encode("utf-8", "backslashreplace")
        except Exception as error:  # a record we cannot encode is still a failure to count
            with self._lock:
                self._fail("encode", error)
            return
        with self._lock:
            try:
                fd = self._open_for(len(line))
                self._write_all(fd, line)
                self.written += 1
            except OSError as error:
                self._close_fd()
                self._fail(_kind(error), error)

    def read(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Records from the rotated files and the live one, oldest first (newest last).

        Lines that are not JSON objects (a torn last line, a foreign file) are skipped.
        """
        records: list[dict[str, Any]] = []
        with self._lock:
            for path in [*reversed(self._rotated_paths()), self.path]:
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                for line in text.splitlines():
                    try:
                        value = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(value, dict):
                        records.append(value)
        if limit is not None:
            return records[-limit:] if limit > 0 else []
        return records

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    def __enter__(self) -> IntegrationErrorLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- under self._lock ------------------------------------------------------------------

    def _open_for(self, size: int) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        # fstat rather than a private counter: the file may have been truncated or rotated
        # by hand, and this way the size is always the real one.
        current = os.fstat(self._fd).st_size
        if current > 0 and current + size > self.max_bytes:
            self._rotate()
            self._fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        return self._fd

    def _rotate(self) -> None:
        self._close_fd()
        rotated = self._rotated_paths()
        if not rotated:
            self.path.unlink(missing_ok=True)
            return
        rotated[-1].unlink(missing_ok=True)
        for older, newer in zip(reversed(rotated), reversed(rotated[:-1]), strict=False):
            if newer.exists():
                newer.replace(older)
        self.path.replace(rotated[0])

    def _rotated_paths(self) -> list[Path]:
        return [self.path.with_name(f"{self.path.name}.{n}") for n in range(1, self.keep + 1)]

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        # One write() per line keeps lines whole in O_APPEND mode; the loop only matters
        # for the rare short write (e.g. interrupted by a signal on a nearly full disk).
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def _fail(self, kind: str, error: BaseException) -> None:
        self.failures += 1
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(
                "cannot write the integration error log %s (%s); further %s errors are counted"
                " silently",
                self.path,
                error,
                kind,
            )


def _kind(error: OSError) -> str:
    return type(error).__name__ if error.errno is None else f"errno {error.errno}"

"""The hooks' spool directory: taking what the hooks wrote, and who ingests it.

``<state dir>/git-spool``, private to the user, holds:

* ``log``: the hooks append one line per run (:mod:`mplp_lsp.vcs.spool_records`);
* ``big.<pid>.<n>``: a record too long for one write, named by a line of the log;
* ``taken.<n>``: a log the ingester renamed away to read. A hook that opened ``log`` just
  before the rename still appends to it, so a taken log is read again from where reading
  stopped until it has been fully read and quiet for :data:`QUIET_NS`; then it goes;
* ``ingester``: the pid of the process that ingests the spool (the daemon, or the
  background ingester a hook started). A hook starts an ingester only when it can create
  this file (noclobber) or finds its process gone, so at most one runs at a time.

Only the store's owner (the holder of the state dir lock) takes records; how far each
taken log was read is recorded in the store with the refs the records moved (``Offsets``),
so a crash in between reads them again, and the replay finds them applied already.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mplp_lsp.vcs.spool_records import (
    FILE_TAG,
    INLINE_LIMIT,
    SIDE_PREFIX,
    HookRecord,
    Spooled,
    format_record,
    parse,
)

LOG: Final = "log"
MARKER: Final = "ingester"
_TAKEN_PREFIX: Final = "taken."
_TAKEN: Final = re.compile(r"taken\.([0-9]{1,20})")
QUIET_NS: Final = 5_000_000_000  # a taken log unchanged this long gets no late line
HOOKS_QUIET: Final = 0.3  # seconds without a new record: the git commands are over
HOOKS_QUIET_LIMIT: Final = 10.0  # ... or the hooks have been writing this long
_LOOK: Final = 0.05

Offsets = dict[str, int]  # taken log name -> bytes read


@dataclass(frozen=True, slots=True)
class Taken:
    """Records in the order the hooks wrote them, each with where it ends in its log."""

    records: list[tuple[str, Spooled]]  # (taken log, record)
    offsets: Offsets  # where reading starts again, for every taken log
    malformed: int


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def ensure(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def append(self, record: HookRecord) -> None:
        """Append ``record`` as a hook does: one write of a short line, or a side file
        written first and a short line naming it."""
        self.ensure()
        line = (format_record(record) + "\n").encode("utf-8", "surrogateescape")
        if len(line) > INLINE_LIMIT:
            for number in range(100):
                name = f"{SIDE_PREFIX}{os.getpid()}.{number}"
                try:
                    fd = os.open(self.directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except FileExistsError:
                    continue
                with os.fdopen(fd, "wb") as handle:
                    handle.write(line)
                line = f"{FILE_TAG} {name}\n".encode("ascii")
                break
        fd = os.open(self.directory / LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def has_new(self) -> bool:
        """Whether hooks wrote since the log was last taken (one ``stat``)."""
        return self.log_size() > 0

    def log_size(self) -> int:
        return _size(self.directory / LOG)

    def wait_quiet(self) -> None:
        """Wait until the log has not grown for :data:`HOOKS_QUIET` (at most
        :data:`HOOKS_QUIET_LIMIT`): taken then, a script of git commands is one round."""
        start = time.monotonic()
        size, since = self.log_size(), start
        while time.monotonic() - start < HOOKS_QUIET_LIMIT:
            time.sleep(_LOOK)
            now = self.log_size()
            if now != size:
                size, since = now, time.monotonic()
            elif time.monotonic() - since >= HOOKS_QUIET:
                return

    def pending(self, offsets: Mapping[str, int]) -> bool:
        """Whether there is something to take (a few ``stat`` calls)."""
        if self.has_new():
            return True
        return any(_size(self.directory / name) > offsets.get(name, 0) for name in self._taken())

    def take(self, offsets: Mapping[str, int]) -> Taken:
        """Rename the log away and read every taken log from where reading stopped."""
        names = self._taken()
        if _size(self.directory / LOG) > 0:
            number = max((int(n.removeprefix(_TAKEN_PREFIX)) for n in names), default=0) + 1
            name = f"{_TAKEN_PREFIX}{number:012d}"
            with contextlib.suppress(FileNotFoundError):
                (self.directory / LOG).rename(self.directory / name)
                names.append(name)
        records: list[tuple[str, Spooled]] = []
        positions: Offsets = {}
        malformed = 0
        for name in names:
            start = offsets.get(name, 0)
            data = _read_from(self.directory / name, start)
            parsed = parse(data, self.directory)
            malformed += parsed.malformed
            records += [
                (name, Spooled(s.record, start + s.end, s.side_file)) for s in parsed.records
            ]
            positions[name] = start + parsed.consumed
        return Taken(records, positions, malformed)

    def finish(self, read: Mapping[str, int], used: list[Spooled]) -> Offsets:
        """After the records read up to ``read`` are stored: drop their side files and the
        taken logs read to the end and quiet since; what is left to record."""
        for spooled in used:
            if spooled.side_file is not None:
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / spooled.side_file).unlink()
        left: Offsets = {}
        now = time.time_ns()
        for name in self._taken():
            path = self.directory / name
            try:
                info = path.stat()
            except FileNotFoundError:
                continue
            done = read.get(name, 0)
            if done >= info.st_size and now - info.st_mtime_ns > QUIET_NS:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            else:
                left[name] = done
        return left

    def _taken(self) -> list[str]:
        try:
            names = [e.name for e in os.scandir(self.directory) if _TAKEN.fullmatch(e.name)]
        except FileNotFoundError:
            return []
        return sorted(names, key=lambda name: int(name.removeprefix(_TAKEN_PREFIX)))

    # --- who ingests ------------------------------------------------------------------

    def claim(self, pid: int) -> None:
        """Name ``pid`` the ingester (the daemon, for as long as it runs)."""
        self.ensure()
        temporary = self.directory / f".{MARKER}.{pid}"
        temporary.write_text(f"{pid}\n", encoding="ascii")
        temporary.replace(self.directory / MARKER)

    def try_claim(self, pid: int) -> bool:
        """Become the ingester if nobody is; a hook that finds the file starts nobody."""
        try:
            fd = os.open(self.directory / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(f"{pid}\n")
        return True

    def release(self, pid: int) -> None:
        """Stop being the ingester (if ``pid`` still is: a hook may have taken over)."""
        path = self.directory / MARKER
        try:
            named = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return
        if named == str(pid):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, start: int) -> bytes:
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            return handle.read()
    except OSError:
        return b""

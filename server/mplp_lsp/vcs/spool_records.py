"""The records the git hooks append to the spool, and reading them back.

A hook run is one line, written by the hook script with one ``printf`` (one ``write``: the
line is at most :data:`INLINE_LIMIT` bytes, under every system's ``PIPE_BUF``, and the file
is opened for appending, so lines of hooks running at the same moment never mix)::

    mplp-hook 1 <hook> <git pid> <here> [<arg>...]<TAB><input line><TAB><input line>...

``<here>`` is 1 when git ran the hook in the workspace's own worktree (0 in a linked
worktree, whose ``HEAD`` is another one). The input lines are what git gave the hook on
standard input (``<old> <new> <ref>`` for ``reference-transaction``); Git's lines hold no
tab (ref names cannot). A longer record goes to a file of its own, written first, and the
log gets a line naming it (``mplp-hook-file <name>``), so the order of the log is the order
of the hook runs either way.

``hooks install`` writes the first record itself, a :data:`BASELINE`: the refs as they are
when the hooks start recording (``<oid> <ref>`` lines), the state the records that follow
move. A store that recorded no refs yet starts from it.

Everything here is untrusted input: a line that is not a record of this shape is skipped
(and counted), never executed or trusted as a path (a file name is one path component).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

RECORD_TAG: Final = "mplp-hook"
FILE_TAG: Final = "mplp-hook-file"
VERSION: Final = "1"
INLINE_LIMIT: Final = 512  # bytes: POSIX's smallest PIPE_BUF (macOS), so one write anywhere
SIDE_PREFIX: Final = "big."
BASELINE: Final = "baseline"
_SIDE_NAME: Final = re.compile(r"big\.[0-9]+\.[0-9]+")
_HOOK_NAME: Final = re.compile(r"[a-z-]{1,40}")


@dataclass(frozen=True, slots=True)
class HookRecord:
    """One hook run, as the hook script wrote it."""

    hook: str
    git_pid: int
    here: bool  # run in the workspace's own worktree
    args: tuple[str, ...]
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Spooled:
    record: HookRecord
    end: int  # where its line ends in the data parsed (the next one starts there)
    side_file: str | None  # the file that held it, when the log only named it


@dataclass(frozen=True, slots=True)
class Parsed:
    records: list[Spooled]
    consumed: int  # bytes of complete lines read; the rest is a line still being written
    malformed: int  # lines that were not records


def parse(data: bytes, directory: Path) -> Parsed:
    """The records in ``data`` (a spool log from some offset), in order; a side file named
    by the log is read from ``directory``."""
    records: list[Spooled] = []
    malformed = position = 0
    complete = data.rfind(b"\n") + 1
    for raw in data[:complete].split(b"\n")[:-1]:
        position += len(raw) + 1
        line = raw.decode("utf-8", "surrogateescape")
        record, side = parse_line(line), None
        if record is None and line.startswith(FILE_TAG + " "):
            side = line.removeprefix(FILE_TAG + " ")
            record = _side_record(directory, side)
        if record is None:
            malformed += 1
        else:
            records.append(Spooled(record, position, side))
    return Parsed(records, complete, malformed)


def format_record(record: HookRecord) -> str:
    """The line the hook script would write for ``record`` (newline excluded)."""
    head = [RECORD_TAG, VERSION, record.hook, str(record.git_pid), "1" if record.here else "0"]
    return "\t".join([" ".join([*head, *record.args]), *record.lines])


def parse_line(line: str) -> HookRecord | None:
    head, *lines = line.split("\t")
    fields = head.split(" ")
    if len(fields) < 5 or fields[0] != RECORD_TAG or fields[1] != VERSION:
        return None
    hook, pid, here = fields[2], fields[3], fields[4]
    if not _HOOK_NAME.fullmatch(hook) or not pid.isdigit() or here not in ("0", "1"):
        return None
    return HookRecord(hook, int(pid), here == "1", tuple(fields[5:]), tuple(filter(None, lines)))


def _side_record(directory: Path, name: str) -> HookRecord | None:
    if not _SIDE_NAME.fullmatch(name):
        return None  # a path, or anything else: not a file the hook writes
    try:
        text = (directory / name).read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return None
    return parse_line(text.rstrip("\n"))

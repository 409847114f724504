"""What drift is: a PSG file node whose record and the file on disk disagree (spec §6.5)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class Strategy(StrEnum):
    """Reconciliation strategies, in the order they are offered."""

    FS = "fs"  # file system wins: the PSG takes the disk's facts and content
    PSG = "psg"  # PSG wins: the recorded content is written back
    MERGE = "merge"  # three-way merge of the disk and the recorded content
    IGNORE = "ignore"  # decide later: hidden until the file changes again


class Reason(StrEnum):
    MODIFIED = "modified"  # the content differs from the recorded hash
    DELETED = "deleted"  # recorded, but gone from the disk
    NOT_A_FILE = "not_a_file"  # replaced by a directory, a symlink, a fifo...
    UNREADABLE = "unreadable"  # its stat changed and it cannot be read to compare


@dataclass(frozen=True, slots=True)
class DiskFacts:
    size: int
    mtime_ns: int
    inode: int
    content_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Drift:
    path: str
    reason: Reason
    detected_at: str
    recorded_at: str | None = None  # the node's last_modified
    disk: DiskFacts | None = None
    note: str | None = None
    state: str = "open"  # or "deferred"

    def message(self) -> str:
        recorded = f" (the PSG recorded it at {self.recorded_at})" if self.recorded_at else ""
        if self.reason is Reason.DELETED:
            text = f"Drift: the file is gone from the disk{recorded}"
        elif self.reason is Reason.NOT_A_FILE:
            text = f"Drift: the path is no longer a regular file{recorded}"
        else:
            what = "cannot be read to compare" if self.reason is Reason.UNREADABLE else "differs"
            since = f", changed on disk at {_iso(self.disk.mtime_ns)}" if self.disk else ""
            text = f"Drift: the file {what} from the project graph{since}{recorded}"
        return f"{text}; {self.note}" if self.note else text

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["reason"] = str(self.reason)
        out["message"] = self.message()
        return out


def _iso(mtime_ns: int) -> str:
    moment = datetime.fromtimestamp(mtime_ns / 1e9, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class RepositoryDrift:
    recorded_head: str | None
    recorded_branch: str | None
    head: str | None
    branch: str | None

    def message(self) -> str:
        return (
            f"Repository drift: the PSG recorded {self.recorded_branch or 'a detached HEAD'} at "
            f"{(self.recorded_head or '?')[:12]}, the repository is on "
            f"{self.branch or 'a detached HEAD'} at {(self.head or '?')[:12]}"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.message()}

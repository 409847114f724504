"""Where a workspace's state lives, and the lock that gives it a single writer.

Each workspace gets its own state dir (the event database, the integration error log and
the lock file). The default is under the user's state directory, named after the folder
plus a hash of its real path, so two checkouts with the same folder name never share a
store and a symlinked path maps to the same store as its target. ``--state-dir`` and
``MPLP_LSP_STATE_DIR`` override it, in that order.

A store belongs to one workspace: the first process to write a state dir names its folder in
the file ``workspace`` there. A chosen state dir that belongs to another folder (one
``MPLP_LSP_STATE_DIR`` or user-level ``stateDir`` for every workspace) is not shared: this
folder's store is ``<state dir>/workspaces/<name>-<hash>`` beside it, named as the default is.

One process writes a state dir at a time (:class:`StateDirLock`, an ``flock`` on
``daemon.lock``). The kernel drops the lock when the holder dies, even on ``kill -9``, so
there is never a stale lock to clean up; the JSON the holder wrote into the file only says
who it is.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mplp_lsp.engine.private import check_private_dir, make_private_dir

__all__ = [
    "DATABASE_NAME",
    "ERROR_LOG_NAME",
    "GIT_SPOOL_NAME",
    "INBOX_NAME",
    "LOCK_NAME",
    "STATE_DIR_ENV",
    "WORKSPACE_NAME",
    "StateDirLock",
    "StateDirLocked",
    "StatePaths",
    "belongs_to",
    "default_state_dir",
    "locate_state_dir",
    "resolve_state_dir",
]

STATE_DIR_ENV: Final = "MPLP_LSP_STATE_DIR"
DATABASE_NAME: Final = "events.db"
ERROR_LOG_NAME: Final = "integration-errors.jsonl"
LOCK_NAME: Final = "daemon.lock"
INBOX_NAME: Final = "inbox"
GIT_SPOOL_NAME: Final = "git-spool"
WORKSPACE_NAME: Final = "workspace"  # the real path of the folder whose store this is

_SLUG_MAX: Final = 40
_ACQUIRE_ATTEMPTS: Final = 3
_ACQUIRE_RETRY_DELAY: Final = 0.005
# Compiled when a store is named after its folder (re caches it), not by every reader.
_UNSAFE: Final = r"[^A-Za-z0-9._-]+"
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StatePaths:
    """The files of one state dir."""

    root: Path

    @property
    def database(self) -> Path:
        return self.root / DATABASE_NAME

    @property
    def error_log(self) -> Path:
        return self.root / ERROR_LOG_NAME

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    @property
    def inbox(self) -> Path:
        """Events handed over by CLI processes while a daemon owns the store."""
        return self.root / INBOX_NAME

    @property
    def git_spool(self) -> Path:
        """What the git hooks recorded, for the store's owner to ingest (vcs/spool.py)."""
        return self.root / GIT_SPOOL_NAME

    @property
    def workspace(self) -> Path:
        """Names the folder whose store this is."""
        return self.root / WORKSPACE_NAME


def default_state_dir(workspace: Path) -> Path:
    """``<user state dir>/mplp-lsp/workspaces/<slug>-<sha256(real path)[:12]>``."""
    # Imported here: platformdirs (tempfile, shutil, urllib) is only needed by a command
    # that names no state dir; `events --state-dir` prints its first line without it.
    import platformdirs

    return _per_workspace(platformdirs.user_state_path("mplp-lsp"), workspace)


def _per_workspace(base: Path, workspace: Path) -> Path:
    # hashlib loads OpenSSL (~25 ms): only a store that is named after its folder needs it.
    import hashlib

    real = os.path.realpath(workspace)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:12]
    return base / "workspaces" / f"{_slug(real)}-{digest}"


def _slug(real_path: str) -> str:
    # Leading dots would make the folder hidden (or look like "." / ".."); the hash keeps
    # names unique, so the slug only has to be readable.
    slug = re.sub(_UNSAFE, "-", Path(real_path).name).lstrip(".-")[:_SLUG_MAX]
    return slug.rstrip(".-") or "workspace"


def locate_state_dir(
    workspace: Path,
    override: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] = os.environ,
) -> Path:
    """The state dir of a workspace (``override`` > ``$MPLP_LSP_STATE_DIR`` > default),
    whether it exists or not: nothing is created (what a command that only reads uses). A
    chosen state dir that belongs to another workspace gives way to this workspace's own
    folder inside it (see the module's documentation). One that exists and that another
    user could change is refused (:class:`~mplp_lsp.engine.private.NotPrivate`) before anything
    in it is read."""
    if override is not None and os.fspath(override) != "":
        chosen = Path(override).expanduser().absolute()
    elif env.get(STATE_DIR_ENV):
        chosen = Path(env[STATE_DIR_ENV]).expanduser().absolute()
    else:
        chosen = default_state_dir(workspace).absolute()
    _check_if_present(chosen)  # before a file in it is read (belongs_to reads two)
    if not belongs_to(chosen, workspace):
        chosen = _per_workspace(chosen, workspace)
        _check_if_present(chosen)
    return chosen


def _check_if_present(folder: Path) -> None:
    """Refuse an existing folder that another user could change (NotPrivate); one that does
    not exist yet is judged when it is made (:func:`resolve_state_dir`)."""
    if os.path.lexists(folder):
        check_private_dir(folder)


def resolve_state_dir(
    workspace: Path,
    override: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] = os.environ,
) -> Path:
    """The state dir to write (:func:`locate_state_dir`), created 0700.

    Directories that already exist keep their permissions; the ones created here (the
    state dir and any missing parents) are private to the user, since the store holds
    workspace activity. A state dir that another user could change (it or a folder above
    it) is refused: :class:`~mplp_lsp.engine.private.NotPrivate`.
    """
    chosen = locate_state_dir(workspace, override, env)
    make_private_dir(chosen)
    return chosen


def belongs_to(state_dir: Path, workspace: Path | str) -> bool:
    """Whether ``state_dir`` is (or may become) ``workspace``'s store: it names no other
    folder, and no other folder's process holds it."""
    owner = _named_workspace(StatePaths(state_dir))
    return owner is None or owner == os.path.realpath(workspace)


def _named_workspace(paths: StatePaths) -> str | None:
    try:
        named = paths.workspace.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        named = ""
    if named:
        return named
    holder = StateDirLock(paths.lock).owner() if paths.lock.exists() else None
    folder = holder.get("workspace") if holder else None
    return os.path.realpath(folder) if isinstance(folder, str) and folder else None


def _name_workspace(paths: StatePaths, workspace: str) -> None:
    """Write the ``workspace`` file, unless the store already names its folder."""
    if paths.workspace.exists():
        return
    scratch = paths.root / f".{WORKSPACE_NAME}.{os.getpid()}"
    scratch.write_text(os.path.realpath(workspace) + "\n", encoding="utf-8")
    scratch.replace(paths.workspace)


class StateDirLocked(RuntimeError):
    """Raised by ``with StateDirLock(...)`` when another holder owns the state dir."""

    def __init__(self, lock_path: Path, owner: dict[str, Any] | None) -> None:
        who = f"pid {owner.get('pid')}" if owner else "another process"
        super().__init__(f"{lock_path} is held by {who}")
        self.lock_path = lock_path
        self.owner = owner


# flock locks belong to an open file description, so two StateDirLock objects in one
# process already exclude each other on local file systems. Where flock is emulated with
# per-process POSIX locks (NFS, some other kernels) they would not; this registry makes
# the in-process case independent of the file system.
_held_in_process: set[str] = set()
_registry_lock = threading.Lock()


def _try_flock(fd: int) -> bool:
    # Here, not at the top (nor envelope's clock below): a command that reads a store needs
    # its paths, not its lock (``events`` prints its first line without either module).
    import fcntl

    # owner() probes with a momentary shared lock; a few short retries keep such a probe
    # from making a real acquire fail. A genuine holder keeps it for its whole life.
    for attempt in range(_ACQUIRE_ATTEMPTS):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt + 1 < _ACQUIRE_ATTEMPTS:
                time.sleep(_ACQUIRE_RETRY_DELAY)
    return False


class StateDirLock:
    """An exclusive, non-blocking lock on a state dir: one writer process per store.

    ``path`` is the lock file (``StatePaths.lock``) or the state dir itself.
    """

    def __init__(self, path: Path, *, workspace: Path | str | None = None) -> None:
        self.path = path / LOCK_NAME if path.is_dir() else path
        self.workspace = None if workspace is None else str(workspace)
        self._fd: int | None = None
        self._key = os.path.realpath(self.path)
        self._info: dict[str, Any] | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lock without waiting; ``False`` if another holder has it."""
        if self._fd is not None:
            return True
        with _registry_lock:
            if self._key in _held_in_process:
                return False
            # O_CLOEXEC: a child we spawn (git, hooks) must not inherit the descriptor, or
            # the lock would outlive this process for as long as the child runs.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                locked = _try_flock(fd)
            except BaseException:
                os.close(fd)
                raise
            if not locked:
                os.close(fd)
                return False
            _held_in_process.add(self._key)
            self._fd = fd
        from mplp_lsp.protocol.envelope import utc_timestamp

        info = {
            "pid": os.getpid(),
            "started_at": utc_timestamp(),
            "argv0": sys.argv[0] if sys.argv else "",
            "workspace": self.workspace,
        }
        try:
            data = json.dumps(info, ensure_ascii=False).encode("utf-8", "backslashreplace")
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except BaseException:
            self.release()
            raise
        self._info = info
        if self.workspace is not None:
            try:
                _name_workspace(StatePaths(self.path.parent), self.workspace)
            except OSError as error:  # read-only or full: the lock's details still name it
                _log.warning("could not name the workspace of %s: %s", self.path.parent, error)
        return True

    def owner(self) -> dict[str, Any] | None:
        """What the current holder wrote (``pid``, ``started_at``, ``argv0``, ``workspace``).

        ``None`` when nobody holds the lock (a file left by a dead holder is not an owner)
        or the holder has not written its details yet.
        """
        if self._info is not None:
            return dict(self._info)
        if not self._held_elsewhere():
            return None
        try:
            value = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def _held_elsewhere(self) -> bool:
        import fcntl

        with _registry_lock:
            if self._key in _held_in_process:
                return True
            try:
                fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return False
            try:
                # A shared probe: it fails exactly when someone holds the exclusive lock.
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            finally:
                os.close(fd)  # closing drops the probe lock too
            return False

    def release(self) -> None:
        """Give the lock up (idempotent). The owner details are cleared first."""
        if self._fd is None:
            return
        with _registry_lock:
            fd, self._fd = self._fd, None
            self._info = None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass  # harmless: owner() checks the lock, not the file
            finally:
                os.close(fd)
                _held_in_process.discard(self._key)

    def __enter__(self) -> StateDirLock:
        if not self.acquire():
            raise StateDirLocked(self.path, self.owner())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

"""A running daemon takes configuration changes: its files are watched, and each part of the
daemon subscribes to the section of the settings it can change live.

A section is a small frozen dataclass naming some of :class:`~mplp_lsp.config.settings.Settings`'
fields
(the same attribute names); a subscriber gets the new and the previous value of its section,
only when that section changed. Settings in no live section need a restart, and
docs/settings.md says which (a test keeps the two equal).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

__all__ = [
    "FILE_POLL",
    "ConfigFileWatch",
    "Debounce",
    "GitPolling",
    "Ignore",
    "LiveSettings",
    "Logging",
    "Recording",
    "Remote",
    "Section",
    "restart_settings",
    "set_log_level",
]

from mplp_lsp.process.log_level import set_log_level

if TYPE_CHECKING:
    import asyncio

    # The settings load where they are compared, not at import: a command that only sets
    # its log level here (serve, before it answers initialize) does not read the schema.
    from mplp_lsp.config.settings import (
        EmailPolicy,
        EventFamily,
        LogLevel,
        RemoteEntry,
        Settings,
    )

log = logging.getLogger(__name__)

FILE_POLL: Final = 0.5  # seconds between looks at the settings files (a few stat calls)


@dataclass(frozen=True, slots=True)
class Section:
    """A part of the settings that one subscriber applies."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls, settings: Settings) -> Any:
        return cls(**{name: getattr(settings, name) for name in cls.names()})


@dataclass(frozen=True, slots=True)
class Debounce(Section):
    debounce_ms: int
    max_wait_ms: int


@dataclass(frozen=True, slots=True)
class Ignore(Section):
    exclude: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GitPolling(Section):
    git_poll_ms: int
    git_author_email: EmailPolicy


@dataclass(frozen=True, slots=True)
class Recording(Section):
    """What the store's owner applies (mplp_lsp.engine.owner.StoreOwner.apply_settings)."""

    event_family: EventFamily
    snapshot_max_bytes: int
    retention_days: int
    store_max_mb: int


@dataclass(frozen=True, slots=True)
class Remote(Section):
    """What forwarding starts with: a change starts it again (mplp_lsp.forward.service)."""

    remote_url: str | None
    remote_token_file: str | None
    remote_allow_insecure_http: bool
    forward_batch_size: int
    forward_batch_bytes: int
    forward_linger_ms: int
    forward_retry_initial_ms: int
    forward_retry_max_ms: int
    forward_disk_budget_mb: int
    forward_report_s: int
    otlp_endpoint: str | None
    otlp_token_file: str | None
    otlp_encoding: str
    otlp_compression: str
    otlp_send_host_name: bool
    remotes: tuple[RemoteEntry, ...]


@dataclass(frozen=True, slots=True)
class Logging(Section):
    log_level: LogLevel


# Read where they are used, each time: a change applies from the next use on.
_READ_AT_USE: Final = frozenset(
    {
        "send_workspace_root",
        "drift_interval",
        "drift_severity",
        "tools",
        "vsl_url",
        "llm_endpoint_url",
        "llm_model",
        "llm_api_key_file",
        "allow_workspace_sensitive_settings",
    }
)
LIVE_SECTIONS: Final[tuple[type[Section], ...]] = (
    Debounce,
    Ignore,
    GitPolling,
    Recording,
    Remote,
    Logging,
)


def restart_settings() -> list[str]:
    """Wire names of the settings a running daemon takes only when it starts again."""
    from mplp_lsp.config.settings import SETTING_NAMES, wire_name

    live = {name for section in LIVE_SECTIONS for name in section.names()} | _READ_AT_USE
    return [wire_name(name) for name in SETTING_NAMES if name not in live]


S = TypeVar("S", bound=Section)


@dataclass(frozen=True, slots=True)
class _Subscription(Generic[S]):
    section: type[S]
    apply: Callable[[S, S], None]

    def changed(self, new: Settings, old: Settings) -> None:
        before, after = self.section.of(old), self.section.of(new)
        if before != after:
            self.apply(after, before)


class LiveSettings:
    """The settings a daemon runs with now, and who applies which section of a change."""

    def __init__(self, settings: Settings) -> None:
        self.current = settings
        self._subscriptions: list[_Subscription[Any]] = []

    def subscribe(self, section: type[S], apply: Callable[[S, S], None]) -> None:
        """``apply(new, previous)`` runs whenever ``section`` changes."""
        self._subscriptions.append(_Subscription(section, apply))

    def update(self, settings: Settings) -> list[str]:
        """Apply ``settings``; the wire names of changed settings that need a restart."""
        old, self.current = self.current, settings
        for subscription in self._subscriptions:
            try:
                subscription.changed(settings, old)
            except Exception:  # one part failing to apply must not stop the others
                log.exception("applying %s settings failed", subscription.section.__name__)
        return [
            name
            for name in restart_settings()
            if getattr(old, _attribute(name)) != getattr(settings, _attribute(name))
        ]


def _attribute(wire: str) -> str:
    from mplp_lsp.config.settings import setting_name

    name = setting_name(wire)
    assert name is not None
    return name


Signature = tuple[tuple[int, int, int] | None, ...]


class ConfigFileWatch:
    """Calls ``changed`` when one of ``files`` appears, goes or is rewritten (polled)."""

    def __init__(
        self,
        files: Sequence[Path],
        changed: Callable[[], Awaitable[None]],
        interval: float = FILE_POLL,
    ) -> None:
        self._files = tuple(files)
        self._changed = changed
        self._interval = interval
        self._seen = self.signature()
        self._task: asyncio.Task[None] | None = None

    def signature(self) -> Signature:
        return tuple(_stat(path) for path in self._files)

    # asyncio is imported where a daemon runs this, not at import: a CLI command that only
    # sets its log level here starts without it.
    def start(self) -> None:
        import asyncio

        self._task = asyncio.get_running_loop().create_task(self._run(), name="config-files")

    async def _run(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(self._interval)
            now = await asyncio.to_thread(self.signature)
            if now == self._seen:
                continue
            self._seen = now
            try:
                await self._changed()
            except Exception:
                log.exception("re-reading the settings failed")

    async def close(self) -> None:
        import asyncio

        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino

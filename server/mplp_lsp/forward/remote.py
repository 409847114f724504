"""Where to forward and with which credential: settings, ``--remote`` and the environment.

Each configured remote is a sink (:mod:`.sinks`). The collector's URL comes from ``--remote``
(front ends pass it in), else ``MPLP_LSP_REMOTE_URL``, else the ``remoteUrl`` setting; its
bearer token from ``MPLP_LSP_REMOTE_TOKEN``, else the file named by ``remoteTokenFile``. An
OTLP receiver's URL is the ``otlpEndpoint`` setting (``MPLP_LSP_OTLP_ENDPOINT`` among its
sources), its token ``MPLP_LSP_OTLP_TOKEN``, else ``otlpTokenFile``. None of them means that
sink is off. A token is never taken from the command line (other users can read a
process's arguments) and never logged.

HTTPS always verifies certificates. Plain HTTP is allowed to a loopback host only, unless
``remoteAllowInsecureHttp`` is set. A URL with a user name or password in it is refused:
credentials belong in the token, not in a string that ends up in logs and status output.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from mplp_lsp.config.settings import RemoteEntry, Settings
from mplp_lsp.config.sources import ways_to_set
from mplp_lsp.forward.batching import BatchLimits
from mplp_lsp.forward.retry import RetryPolicy

__all__ = [
    "OTLP_TOKEN_ENV",
    "REMOTE_TOKEN_ENV",
    "RemoteConfig",
    "RemoteConfigError",
    "batch_limits",
    "configured_remotes",
    "remote_identity",
    "resolve_otlp",
    "resolve_remote",
    "retry_policy",
]

REMOTE_TOKEN_ENV: Final = "MPLP_LSP_REMOTE_TOKEN"  # noqa: S105 (a variable name)
OTLP_TOKEN_ENV: Final = "MPLP_LSP_OTLP_TOKEN"  # noqa: S105 (a variable name)
_MAX_TOKEN_BYTES: Final = 4096


class RemoteConfigError(ValueError):
    """The remote is configured but unusable (bad URL, insecure, unreadable token file)."""


@dataclass(frozen=True, slots=True)
class RemoteConfig:
    url: str  # the base URL as configured (no credentials in it)
    kind: str = "collector"  # the sink kind (mplp_lsp.forward.sinks)
    token: str | None = field(default=None, repr=False)
    budget_bytes: int = 1024 * 2**20
    name: str = ""  # the sink's name (the kind's for the short forms)
    options: Mapping[str, Any] = field(default_factory=dict)  # the kind's, by wire name


def resolve_remote(
    settings: Settings, remote_url: str | None = None, env: Mapping[str, str] = os.environ
) -> RemoteConfig | None:
    """The remote to forward to, or None when forwarding is off. Raises RemoteConfigError.

    ``remote_url`` is a URL given for this call alone (``emit --remote``); otherwise the
    setting, which already took MPLP_LSP_REMOTE_URL in its place among the sources (reading
    the variable here too would let it win over ``--no-remote``)."""
    url = remote_url or settings.remote_url
    if not url:
        return None
    base = _checked_url(url, allow_insecure=settings.remote_allow_insecure_http)
    return RemoteConfig(
        url=base,
        kind="collector",
        token=_token(REMOTE_TOKEN_ENV, settings.remote_token_file, env),
        budget_bytes=settings.forward_disk_budget_mb * 2**20,
    )


def configured_remotes(
    settings: Settings, remote_url: str | None = None, env: Mapping[str, str] = os.environ
) -> tuple[dict[str, RemoteConfig], dict[str, str]]:
    """Every sink the settings configure, by name, and why each refused one is refused:
    the collector (``remoteUrl``, ``--remote``), the OTLP receiver (``otlpEndpoint``), then
    each ``remotes`` entry. One refused sink leaves the others on."""
    found: dict[str, RemoteConfig] = {}
    problems: dict[str, str] = {}
    short_forms = (
        ("collector", partial(resolve_remote, settings, remote_url, env)),
        ("otlp", partial(resolve_otlp, settings, env)),
    )
    for name, resolve in short_forms:
        try:
            remote = resolve()
        except RemoteConfigError as error:
            problems[name] = str(error)
            continue
        if remote is not None:
            found[name] = replace(remote, name=name)
    for entry in settings.remotes:
        name = entry.name or entry.kind
        if name in found or name in problems:
            problems[f"{name} (remotes)"] = (
                f"a sink named {name} is configured already: give this remotes entry a name"
            )
            continue
        try:
            found[name] = _entry(settings, entry, name, env)
        except RemoteConfigError as error:
            problems[name] = str(error)
    return found, problems


def _entry(
    settings: Settings, entry: RemoteEntry, name: str, env: Mapping[str, str]
) -> RemoteConfig:
    base = _checked_url(entry.url, allow_insecure=settings.remote_allow_insecure_http)
    token = env.get(entry.token_env) if entry.token_env else None
    return RemoteConfig(
        url=base,
        kind=entry.kind,
        token=token.strip() if token else _token_file(entry.token_file),
        budget_bytes=settings.forward_disk_budget_mb * 2**20,
        name=name,
        options=dict(entry.options),
    )


def resolve_otlp(settings: Settings, env: Mapping[str, str] = os.environ) -> RemoteConfig | None:
    """The OTLP receiver to forward to beside the collector, or None. Raises
    RemoteConfigError, as :func:`resolve_remote` does, under the same rules."""
    if not settings.otlp_endpoint:
        return None
    base = _checked_url(settings.otlp_endpoint, allow_insecure=settings.remote_allow_insecure_http)
    return RemoteConfig(
        url=base,
        kind="otlp",
        token=_token(OTLP_TOKEN_ENV, settings.otlp_token_file, env),
        budget_bytes=settings.forward_disk_budget_mb * 2**20,
    )


_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def remote_identity(url: str) -> str:
    """Which remote envelopes are queued for: ``url`` as ``scheme://host[:port]/path``, the
    scheme and host in lower case, a default port and a trailing slash left out, and never
    a user name, password, query or fragment (docs/forwarding.md). Raises ValueError for
    what is not an http(s) URL with a host."""
    parts = urlsplit(url.strip())
    host, port = parts.hostname, parts.port  # the port raises on a bad one
    if parts.scheme.lower() not in _DEFAULT_PORTS or not host:
        raise ValueError(f"not an http:// or https:// URL with a host: {url!r}")
    scheme = parts.scheme.lower()
    netloc = f"[{host}]" if ":" in host else host  # hostname is lower case, without brackets
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def batch_limits(settings: Settings) -> BatchLimits:
    return BatchLimits(
        max_count=settings.forward_batch_size,
        max_bytes=settings.forward_batch_bytes,
        linger=settings.forward_linger_ms / 1000,
    )


def retry_policy(settings: Settings) -> RetryPolicy:
    initial = settings.forward_retry_initial_ms / 1000
    return RetryPolicy(
        initial_delay=initial, max_delay=max(initial, settings.forward_retry_max_ms / 1000)
    )


def _checked_url(url: str, *, allow_insecure: bool) -> str:
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        _ = parts.port  # raises on a bad port
    except ValueError as error:
        raise RemoteConfigError(f"remote URL is not valid: {error}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise RemoteConfigError("remote URL must be http:// or https:// with a host")
    if parts.username is not None or parts.password is not None:
        raise RemoteConfigError(
            "remote URL must not contain credentials; use MPLP_LSP_REMOTE_TOKEN or remoteTokenFile"
        )
    if parts.query or parts.fragment:
        raise RemoteConfigError("remote URL must not have a query or fragment")
    if parts.scheme == "http" and not allow_insecure and not is_loopback_host(host):
        raise RemoteConfigError(
            "plain http:// is allowed to a loopback host only; use https://, or "
            + ways_to_set("remoteAllowInsecureHttp", "true")
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's host name, brackets removed) is this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _token(variable: str, token_file: str | None, env: Mapping[str, str]) -> str | None:
    token = env.get(variable)
    if token:
        return token.strip()
    return _token_file(token_file)


def _token_file(token_file: str | None) -> str | None:
    if token_file is None:
        return None
    path = Path(token_file).expanduser()
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_TOKEN_BYTES + 1)
    except OSError as error:
        raise RemoteConfigError(f"cannot read the token file {path}: {error.strerror}") from None
    if len(raw) > _MAX_TOKEN_BYTES:
        raise RemoteConfigError(f"the token file {path} is too big for a token")
    try:
        text = raw.decode().strip()
    except UnicodeDecodeError:
        raise RemoteConfigError(f"the token file {path} is not UTF-8 text") from None
    if not text or any(c in text for c in "\r\n"):
        raise RemoteConfigError(f"the token file {path} must hold one token on one line")
    return text

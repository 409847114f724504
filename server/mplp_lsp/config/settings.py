"""User settings: a frozen, typed :class:`Settings` and a loader that never fails.

``schemas/settings.schema.json`` is the description users, docs and the VS Code extension see;
the model mirrors its names, defaults and types (a test keeps the two equal), and every value
is checked against the schema itself (:mod:`mplp_lsp.config.setting_values`).

:func:`parse_settings` accepts what editors actually send:

* ``None`` (no settings: defaults);
* an object of settings, or one holding them under ``"mplp"`` (other tools' sections beside it
  are not ours to judge). Keys may be the wire names (``debounceMs``), the attribute names
  (``debounce_ms``) or the VS Code form (``mplp.debounceMs``, as users copy it from
  ``settings.json`` into a Neovim config);
* a list of such objects, one per workspace folder, each optionally naming its folder URI in
  ``"scopeUri"`` or ``"folder"``. An entry applies if it names no folder or a folder containing
  ``folder_uri`` (compared per path segment after percent-decoding). Applicable entries merge
  key by key, the more specific (longer folder) over the less; between equally specific
  entries the later wins, so ``[initializationOptions, pulled configuration]`` works. With
  ``folder_uri=None`` only entries without a folder apply.

Settings that run a program, read a file or send data (:data:`SENSITIVE_SETTINGS`) are taken
only from the user's own, machine-level configuration: an entry marked ``"origin":
"workspace"`` (settings a workspace carries in its own files; every such source must mark
its entries so) loses them, with a warning, unless a machine-level entry turned
``allowWorkspaceSensitiveSettings`` on; that switch itself is never taken from a workspace.
Editors send machine-level values for these keys (the VS Code extension takes them from
``inspect()``; a Neovim configuration is the user's own).

A bad value costs only its own key: it falls back to that key's default with a warning naming
the key and the reason. Unknown keys are reported, not silently dropped. The strictness is JSON
Schema's: ``true`` is not an integer, ``1.0`` is, ``"500"`` is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal
from urllib.parse import unquote

from mplp_lsp.config.setting_values import problem, typed
from mplp_lsp.protocol.schemas import load_json

__all__ = [
    "ALLOW_WORKSPACE_SENSITIVE",
    "SENSITIVE_SETTINGS",
    "DriftSeverity",
    "EditorValues",
    "EmailPolicy",
    "EventFamily",
    "LogLevel",
    "OtlpCompression",
    "OtlpEncoding",
    "Problem",
    "RemoteEntry",
    "Settings",
    "SettingsError",
    "SinkKindName",
    "ToolTask",
    "checked",
    "editor_values",
    "parse_settings",
    "setting_name",
    "settings_schema",
    "wire_name",
    "workspace_level_only",
]

EventFamily = Literal["spec", "upstream"]
LogLevel = Literal["error", "warning", "info", "debug"]
EmailPolicy = Literal["keep", "hash", "drop"]
DriftSeverity = Literal["error", "warning", "information", "hint"]
SinkKindName = Literal["collector", "otlp"]
OtlpEncoding = Literal["json", "protobuf"]
OtlpCompression = Literal["gzip", "none"]
ToolKind = Literal["linter", "formatter", "test_runner", "generator", "other"]

_SECTION = "mplp"
_FOLDER_KEYS = ("scopeUri", "folder")
_ORIGIN_KEY = "origin"
_WORKSPACE_ORIGIN = "workspace"
# Wire names. interpreter and serverPath start the server: the editors read them, the
# server never sees them, but the rule is the same.
SENSITIVE_SETTINGS = frozenset(
    {
        "serverPath",
        "interpreter",
        "tools",
        "remoteUrl",
        "remoteTokenFile",
        "remoteAllowInsecureHttp",
        "otlpEndpoint",
        "otlpTokenFile",
        "otlpSendHostName",
        "remotes",
        "stateDir",
        "vslUrl",
        "llmEndpointUrl",
        "llmModel",
        "llmApiKeyFile",
    }
)
ALLOW_WORKSPACE_SENSITIVE = "allowWorkspaceSensitiveSettings"
_SHOWN_CHARS = 60


@dataclass(frozen=True, slots=True)
class RemoteEntry:
    """One entry of the ``remotes`` setting: a forwarding sink of ``kind`` at ``url``
    (docs/forwarding.md#sinks). ``options`` keeps the kind's options as given, by wire name."""

    kind: SinkKindName
    url: str
    name: str | None = None
    token_file: str | None = None
    token_env: str | None = None
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, key: str, default: Any) -> Any:
        return dict(self.options).get(key, default)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "url": self.url}
        for key, value in (
            ("name", self.name),
            ("tokenFile", self.token_file),
            ("tokenEnv", self.token_env),
        ):
            if value is not None:
                out[key] = value
        if self.options:
            out["options"] = dict(self.options)
        return out


@dataclass(frozen=True, slots=True)
class ToolTask:
    """A tool the editor can run by name (``mplp.runTool``); recorded like ``mplp-lsp run``."""

    command: tuple[str, ...]
    kind: ToolKind = "other"
    cwd: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"command": list(self.command), "kind": self.kind}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        return out


class SettingsError(ValueError):
    """Values the settings schema refuses (each key with its reason)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The daemon's settings; attribute names are snake_case, wire names camelCase.

    The fields mirror ``schemas/settings.schema.json`` (names, defaults and types; a test
    keeps the two equal); the schema's rules check every value (:func:`Settings.checked`).
    Constructing one directly does not check: code builds it from checked values.
    """

    debounce_ms: int = 500
    max_wait_ms: int = 2000
    exclude: tuple[str, ...] = ()
    # Kept as sorted (name, task) pairs so settings stay hashable; an object on the wire.
    tools: tuple[tuple[str, ToolTask], ...] = ()
    send_workspace_root: bool = False
    event_family: EventFamily = "spec"
    log_level: LogLevel = "warning"
    state_dir: str | None = None
    api_port: int = 0
    git_poll_ms: int = 1000
    git_author_email: EmailPolicy = "hash"
    # Forwarding (docs/forwarding.md); the token is never a setting value, only a file name.
    remote_url: str | None = None
    remote_token_file: str | None = None
    remote_allow_insecure_http: bool = False
    forward_batch_size: int = 1000
    forward_batch_bytes: int = 1_048_576
    forward_linger_ms: int = 50
    forward_retry_initial_ms: int = 1000
    forward_retry_max_ms: int = 300_000
    forward_disk_budget_mb: int = 1024
    forward_report_s: int = 30
    # An OTLP/HTTP logs sink beside the collector (docs/forwarding.md#opentelemetry).
    otlp_endpoint: str | None = None
    otlp_token_file: str | None = None
    otlp_encoding: OtlpEncoding = "json"
    otlp_compression: OtlpCompression = "gzip"
    otlp_send_host_name: bool = False
    # More remotes, of any sink kind, each with its own name, URL, token and options.
    remotes: tuple[RemoteEntry, ...] = ()
    drift_interval: int = 60
    drift_severity: DriftSeverity = "warning"
    snapshot_max_bytes: int = 1_048_576
    # Retention of the local store (docs/daemon.md#retention-and-compaction).
    retention_days: int = 365
    store_max_mb: int = 512
    api_enabled: bool = True
    # The L3 runtime (docs/runtime-execution.md); the LLM key is never a setting, only a file.
    vsl_url: str | None = None
    llm_endpoint_url: str | None = None
    llm_model: str | None = None
    llm_api_key_file: str | None = None
    # Machine-level only: lets a workspace's own settings set the SENSITIVE_SETTINGS.
    allow_workspace_sensitive_settings: bool = False

    @classmethod
    def checked(cls, values: dict[str, Any]) -> Settings:
        """Settings from values by attribute name; :class:`SettingsError` for refused ones."""
        good, problems = checked(values)
        if problems:
            raise SettingsError(problems)
        return cls(**{name: _model_value(name, value) for name, value in good.items()})

    def tool(self, name: str) -> ToolTask | None:
        return dict(self.tools).get(name)

    def to_wire(self, names: set[str] | None = None) -> dict[str, Any]:
        """The settings as JSON values by wire name (of ``names``, attribute names, if given)."""
        out: dict[str, Any] = {}
        for name in SETTING_NAMES:
            if names is None or name in names:
                out[_ALIASES[name]] = _wire_value(name, getattr(self, name))
        return out


def _wire_value(name: str, value: Any) -> Any:
    """A model value as JSON (the tool table as an object, tuples as lists)."""
    if name == "tools":
        return {key: task.to_wire() for key, task in value}
    if name == "remotes":
        return [entry.to_wire() for entry in value]
    return list(value) if isinstance(value, tuple) else value


SETTING_NAMES: Final[tuple[str, ...]] = tuple(f.name for f in fields(Settings))
_ALIASES: dict[str, str] = {
    name: name.split("_")[0] + "".join(part.capitalize() for part in name.split("_")[1:])
    for name in SETTING_NAMES
}
_NAMES: dict[str, str] = {alias: name for name, alias in _ALIASES.items()} | {
    name: name for name in _ALIASES
}
_DEFAULTS: Final = {f.name: f.default for f in fields(Settings)}


def settings_schema() -> dict[str, Any]:
    """``schemas/settings.schema.json`` (a fresh copy; callers may change it)."""
    return load_json("settings.schema.json")


_PROPERTIES: Final[dict[str, Any]] = settings_schema()["properties"]


def parse_settings(raw: Any, *, folder_uri: str | None = None) -> tuple[Settings, list[str]]:
    """The settings for the folder ``folder_uri`` from what the editor sent, and warnings."""
    layer = editor_values(raw, folder_uri=folder_uri)
    warnings = layer.warnings
    values, problems = checked(layer.values)
    for refused in problems:
        default = json.dumps(_wire_value(refused.name, _DEFAULTS[refused.name]))
        warnings.append(f"{refused}; using the default {default}")
    return Settings.checked(values), warnings


# eq=False: nothing compares these (what `events` loads: docs/daemon.md).
@dataclass(frozen=True, slots=True, eq=False)
class Problem:
    """A value of one setting that the schema refuses."""

    name: str  # the attribute name
    reason: str
    value: Any

    def __str__(self) -> str:
        return f"{_ALIASES[self.name]}: {self.described()}"

    def described(self) -> str:
        """The reason and the value, without the setting's name."""
        return f"{self.reason} (got {_shown(self.value)})"


def checked(values: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """The values (by attribute name) the schema accepts, as given, and a problem per refused
    one (by its property in ``schemas/settings.schema.json``)."""
    good: dict[str, Any] = {}
    problems: list[Problem] = []
    for name, value in values.items():
        reason = problem(value, _PROPERTIES[_ALIASES[name]])
        if reason is None:
            good[name] = value
        else:
            problems.append(Problem(name, reason, value))
    return good, problems


def _model_value(name: str, value: Any) -> Any:
    """A checked value in the model's type."""
    if name == "tools":
        return tuple(
            sorted(
                (
                    key,
                    ToolTask(tuple(task["command"]), task.get("kind", "other"), task.get("cwd")),
                )
                for key, task in value.items()
            )
        )
    if name == "remotes":
        return tuple(
            RemoteEntry(
                entry["kind"],
                entry["url"],
                entry.get("name"),
                entry.get("tokenFile"),
                entry.get("tokenEnv"),
                tuple(sorted(entry.get("options", {}).items())),
            )
            for entry in value
        )
    return typed(value)


def setting_name(key: Any) -> str | None:
    """The attribute name for a key as users write it (``debounceMs``, ``debounce_ms``,
    ``mplp.debounceMs``), or None for a key that is not a setting."""
    if not isinstance(key, str):
        return None
    return _NAMES.get(key.removeprefix(_SECTION + "."))


def wire_name(name: str) -> str:
    """The camelCase name of the setting with attribute name ``name``."""
    return _ALIASES[name]


# eq=False: nothing compares these (what `events` loads: docs/daemon.md).
@dataclass(slots=True, eq=False)
class EditorValues:
    """What the editor set for one folder: values by attribute name (only the keys it set)."""

    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # The opt-in as the editor's machine-level entries set it (None: they do not set it).
    allows_workspace_sensitive: bool | None = None


def editor_values(
    raw: Any, *, folder_uri: str | None = None, allowed: bool | None = None
) -> EditorValues:
    """The editor's settings for ``folder_uri``. Workspace-level entries lose the sensitive
    settings unless the user opted in: ``allowed`` when the caller decided that from all the
    user's sources, else the editor's machine-level entries (the more specific deciding)."""
    layer = EditorValues()
    for key, value in _select(raw, folder_uri, allowed, layer).items():
        name = setting_name(key)
        if name is None:
            layer.warnings.append(f"unknown setting {_shown(key)} ignored")
        else:
            layer.values[name] = value
    return layer


def _select(
    raw: Any, folder_uri: str | None, allowed: bool | None, layer: EditorValues
) -> dict[Any, Any]:
    """The raw key/value pairs that apply to ``folder_uri``, merged."""
    warnings = layer.warnings
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return _unwrap(raw)
    if not isinstance(raw, list | tuple):
        warnings.append(f"settings must be an object or a list of objects, not {_kind(raw)}")
        return {}
    target = None if folder_uri is None else _folder_key(folder_uri)
    ranked: list[tuple[int, bool, dict[Any, Any]]] = []
    for index, entry in enumerate(raw):
        if entry is None:
            continue
        if not isinstance(entry, dict):
            warnings.append(f"settings entry {index} is {_kind(entry)}, not an object; ignored")
            continue
        folder = next((entry[k] for k in _FOLDER_KEYS if entry.get(k) is not None), None)
        workspace = entry.get(_ORIGIN_KEY) == _WORKSPACE_ORIGIN
        meta = (*_FOLDER_KEYS, _ORIGIN_KEY)
        body = _unwrap({k: v for k, v in entry.items() if k not in meta})
        if folder is None:
            ranked.append((-1, workspace, body))
        elif not isinstance(folder, str):
            warnings.append(f"settings entry {index}: the folder is {_kind(folder)}; ignored")
        elif target is not None and _contains(key := _folder_key(folder), target):
            ranked.append((len(key), workspace, body))
    ranked.sort(key=lambda item: item[0])
    for _rank, workspace, body in ranked:
        switch = next(
            (v for k, v in body.items() if _wire_name(k) == ALLOW_WORKSPACE_SENSITIVE), None
        )
        if not workspace and isinstance(switch, bool):
            layer.allows_workspace_sensitive = switch
    permitted = bool(layer.allows_workspace_sensitive if allowed is None else allowed)
    merged: dict[Any, Any] = {}
    for _rank, workspace, body in ranked:
        merged.update(workspace_level_only(body, permitted, warnings) if workspace else body)
    return merged


def workspace_level_only(
    body: dict[Any, Any], allowed: bool, warnings: list[str], where: str = ""
) -> dict[Any, Any]:
    """A workspace-level source's values without the settings it may not set."""
    refused = {ALLOW_WORKSPACE_SENSITIVE} | (set() if allowed else SENSITIVE_SETTINGS)
    for key in sorted(refused & {_wire_name(k) for k in body if isinstance(k, str)}):
        warnings.append(
            f"{where}{key} is ignored in a workspace's own settings: it runs a "
            f"program, reads a file or sends data; set it in your user settings (or set "
            f"{ALLOW_WORKSPACE_SENSITIVE} there)"
        )
    return {k: v for k, v in body.items() if not (isinstance(k, str) and _wire_name(k) in refused)}


def _wire_name(key: Any) -> Any:
    name = setting_name(key)
    return _ALIASES[name] if name is not None else key


def _unwrap(section: dict[Any, Any]) -> dict[Any, Any]:
    inner = section.get(_SECTION)
    if isinstance(inner, dict):
        section = inner
    prefix = _SECTION + "."
    return {
        key.removeprefix(prefix) if isinstance(key, str) else key: value
        for key, value in section.items()
    }


def _folder_key(uri: str) -> str:
    return unquote(uri).rstrip("/")


def _contains(folder: str, target: str) -> bool:
    return target == folder or target.startswith(folder + "/")


_JSON_KINDS: dict[type, str] = {
    bool: "a boolean",
    str: "a string",
    int: "a number",
    float: "a number",
    list: "a list",
    tuple: "a list",
    dict: "an object",
    type(None): "null",
}


def _kind(value: Any) -> str:
    return _JSON_KINDS.get(type(value), f"a {type(value).__name__}")


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"

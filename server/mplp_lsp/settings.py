"""User settings: a frozen, typed :class:`Settings` and a loader that never fails.

``schemas/settings.schema.json`` is the description users, docs and the VS Code extension see;
this model mirrors it (names, defaults, enums, bounds), and a test keeps the two equal.

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
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    Strict,
    ValidationError,
)

from mplp_lsp.protocol.schemas import load_json

__all__ = [
    "ALLOW_WORKSPACE_SENSITIVE",
    "SENSITIVE_SETTINGS",
    "DriftSeverity",
    "EditorValues",
    "EmailPolicy",
    "EventFamily",
    "LogLevel",
    "Problem",
    "Settings",
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
        "stateDir",
        "vslUrl",
        "llmEndpointUrl",
        "llmModel",
        "llmApiKeyFile",
    }
)
ALLOW_WORKSPACE_SENSITIVE = "allowWorkspaceSensitiveSettings"
_SHOWN_CHARS = 60


def _integral(value: Any) -> Any:
    # JSON Schema counts 1.0 as an integer; settings that validate against the schema must load.
    return int(value) if isinstance(value, float) and value.is_integer() else value


_Int = Annotated[int, Strict(), BeforeValidator(_integral)]
_Str = Annotated[str, Strict()]
_HTTP_URL = r"^https?://[^\s/?#@]+"


def _http_url(value: str) -> str:
    if not re.match(_HTTP_URL, value):
        raise ValueError("not an http:// or https:// URL")
    return value


# Checked here, not only where it is used: a typo (`--set remoteUrl=null`) is an error at once.
_HttpUrl = Annotated[
    _Str, AfterValidator(_http_url), Field(min_length=1, json_schema_extra={"pattern": _HTTP_URL})
]


class ToolTask(BaseModel):
    """A tool the editor can run by name (``mplp.runTool``); recorded like ``mplp-lsp run``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: tuple[_Str, ...] = Field(min_length=1)
    kind: ToolKind = "other"
    cwd: _Str | None = None


def _tool_pairs(value: Any) -> Any:
    if not isinstance(value, dict):
        raise ValueError("tools must be an object of named tool tasks")
    return tuple(sorted(value.items()))


_ToolTable = Annotated[
    tuple[tuple[_Str, ToolTask], ...],
    BeforeValidator(_tool_pairs, json_schema_input_type=dict[str, ToolTask]),
    PlainSerializer(lambda pairs: {name: task for name, task in pairs}),
]


class Settings(BaseModel):
    """The daemon's settings; attribute names are snake_case, wire names camelCase."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    debounce_ms: _Int = Field(default=500, alias="debounceMs", ge=0, le=60_000)
    max_wait_ms: _Int = Field(default=2000, alias="maxWaitMs", ge=0, le=600_000)
    exclude: tuple[_Str, ...] = Field(default=(), alias="exclude")
    # Kept as sorted (name, task) pairs so settings stay hashable; an object on the wire.
    tools: _ToolTable = Field(default=(), alias="tools")
    send_workspace_root: Annotated[bool, Strict()] = Field(default=False, alias="sendWorkspaceRoot")
    event_family: EventFamily = Field(default="spec", alias="eventFamily")
    log_level: LogLevel = Field(default="warning", alias="logLevel")
    state_dir: Annotated[_Str, Field(min_length=1)] | None = Field(default=None, alias="stateDir")
    api_port: _Int = Field(default=0, alias="apiPort", ge=0, le=65_535)
    git_poll_ms: _Int = Field(default=1000, alias="gitPollMs", ge=0, le=600_000)
    git_author_email: EmailPolicy = Field(default="hash", alias="gitAuthorEmail")
    # Forwarding (docs/forwarding.md); the token is never a setting value, only a file name.
    remote_url: _HttpUrl | None = Field(default=None, alias="remoteUrl")
    remote_token_file: Annotated[_Str, Field(min_length=1)] | None = Field(
        default=None, alias="remoteTokenFile"
    )
    remote_allow_insecure_http: Annotated[bool, Strict()] = Field(
        default=False, alias="remoteAllowInsecureHttp"
    )
    forward_batch_size: _Int = Field(default=1000, alias="forwardBatchSize", ge=1, le=10_000)
    forward_batch_bytes: _Int = Field(
        default=1_048_576, alias="forwardBatchBytes", ge=1024, le=67_108_864
    )
    forward_linger_ms: _Int = Field(default=50, alias="forwardLingerMs", ge=0, le=10_000)
    forward_retry_initial_ms: _Int = Field(
        default=1000, alias="forwardRetryInitialMs", ge=1, le=3_600_000
    )
    forward_retry_max_ms: _Int = Field(
        default=300_000, alias="forwardRetryMaxMs", ge=1, le=86_400_000
    )
    forward_disk_budget_mb: _Int = Field(
        default=1024, alias="forwardDiskBudgetMb", ge=1, le=1_048_576
    )
    forward_report_s: _Int = Field(default=30, alias="forwardReportS", ge=1, le=3600)
    drift_interval: _Int = Field(default=60, alias="driftInterval", ge=0, le=86_400)
    drift_severity: DriftSeverity = Field(default="warning", alias="driftSeverity")
    snapshot_max_bytes: _Int = Field(
        default=1_048_576, alias="snapshotMaxBytes", ge=0, le=67_108_864
    )
    api_enabled: Annotated[bool, Strict()] = Field(default=True, alias="apiEnabled")
    # The L3 runtime (docs/runtime-execution.md); the LLM key is never a setting, only a file.
    vsl_url: Annotated[_Str, Field(min_length=1)] | None = Field(default=None, alias="vslUrl")
    llm_endpoint_url: _HttpUrl | None = Field(default=None, alias="llmEndpointUrl")
    llm_model: Annotated[_Str, Field(min_length=1)] | None = Field(default=None, alias="llmModel")
    llm_api_key_file: Annotated[_Str, Field(min_length=1)] | None = Field(
        default=None, alias="llmApiKeyFile"
    )
    # Machine-level only: lets a workspace's own settings set the SENSITIVE_SETTINGS.
    allow_workspace_sensitive_settings: Annotated[bool, Strict()] = Field(
        default=False, alias="allowWorkspaceSensitiveSettings"
    )

    def tool(self, name: str) -> ToolTask | None:
        return dict(self.tools).get(name)


_ALIASES: dict[str, str] = {
    name: field.alias or name for name, field in Settings.model_fields.items()
}
_NAMES: dict[str, str] = {alias: name for name, alias in _ALIASES.items()} | {
    name: name for name in _ALIASES
}


def settings_schema() -> dict[str, Any]:
    """``schemas/settings.schema.json`` (a fresh copy; callers may change it)."""
    return load_json("settings.schema.json")


def parse_settings(raw: Any, *, folder_uri: str | None = None) -> tuple[Settings, list[str]]:
    """The settings for the folder ``folder_uri`` from what the editor sent, and warnings."""
    layer = editor_values(raw, folder_uri=folder_uri)
    warnings = layer.warnings
    values, problems = checked(layer.values)
    for problem in problems:
        default = json.dumps(Settings.model_fields[problem.name].default, default=list)
        warnings.append(f"{problem}; using the default {default}")
    try:
        return Settings.model_validate(values), warnings
    except ValidationError:  # pragma: no cover - checked() left only values that validate
        warnings.append("settings could not be read; using the defaults")
        return Settings(), warnings


@dataclass(frozen=True, slots=True)
class Problem:
    """A value of one setting that the model refuses."""

    name: str  # the attribute name
    reason: str
    value: Any

    def __str__(self) -> str:
        return f"{_ALIASES[self.name]}: {self.described()}"

    def described(self) -> str:
        """The reason and the value, without the setting's name."""
        return f"{self.reason} (got {_shown(self.value)})"


def checked(values: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """The values (by attribute name) the model accepts, and a problem per refused one."""
    values = dict(values)
    problems: list[Problem] = []
    while True:
        try:
            Settings.model_validate(values)
            return values, problems
        except ValidationError as error:
            failed: dict[str, list[str]] = {}
            for issue in error.errors(include_url=False):
                name = str(issue["loc"][0]) if issue["loc"] else ""
                item = "".join(f"item {part}: " for part in issue["loc"][1:])
                # A validator's own ValueError reads as pydantic's "Value error, <ours>".
                message = issue["msg"].removeprefix("Value error, ")
                failed.setdefault(name, []).append(item + _lower_first(message))
            if not failed.keys() & values.keys():  # pragma: no cover - no cross-field rules
                return {}, problems
            for name, reasons in failed.items():
                if name in values:
                    problems.append(Problem(name, "; ".join(reasons), values.pop(name)))


def setting_name(key: Any) -> str | None:
    """The attribute name for a key as users write it (``debounceMs``, ``debounce_ms``,
    ``mplp.debounceMs``), or None for a key that is not a setting."""
    if not isinstance(key, str):
        return None
    return _NAMES.get(key.removeprefix(_SECTION + "."))


def wire_name(name: str) -> str:
    """The camelCase name of the setting with attribute name ``name``."""
    return _ALIASES[name]


@dataclass(slots=True)
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


def _lower_first(message: str) -> str:
    return message[:1].lower() + message[1:]

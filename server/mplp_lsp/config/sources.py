"""Where settings come from besides the editor: TOML files, the environment, flags.

Each source gives a :class:`Layer`: the values it sets, by attribute name, with warnings for
what it could not give. Nothing here decides precedence (:mod:`mplp_lsp.config.resolve`).

* The user's file: ``$XDG_CONFIG_HOME/mplp-lsp/config.toml`` (``~/.config`` when the variable
  is unset or not an absolute path, as the XDG base directory specification says).
* The workspace's file: ``.mplp-lsp.toml`` at the workspace root, else the ``[tool.mplp-lsp]``
  table of its ``pyproject.toml``. When both exist the ``.mplp-lsp.toml`` is used and the table
  is reported as ignored: one file, never a merge of two.
* The environment: ``MPLP_LSP_<NAME>`` with the snake_case name upper-cased
  (``MPLP_LSP_DEBOUNCE_MS``). Text settings take the text; booleans ``true``/``false``
  (``1``/``0``, ``yes``/``no``, ``on``/``off``); numbers, lists and objects are JSON.
* Flags: ``--set KEY=VALUE`` (values read as for the environment; ``KEY=`` puts the setting
  back to its default for the run, which for ``remoteUrl`` means no forwarding) and the
  dedicated flags. The user typed them on this very command line, so a bad one is an error
  (:attr:`Layer.errors`), where every other source only warns and falls back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mplp_lsp.config.settings import (
    SETTING_NAMES,
    Settings,
    checked,
    setting_name,
    settings_schema,
    wire_name,
)

__all__ = [
    "ENV_PREFIX",
    "PYPROJECT",
    "RESET",
    "WORKSPACE_FILE",
    "Layer",
    "config_files",
    "env_layer",
    "env_name",
    "file_layer",
    "flag_layer",
    "text_value",
    "user_file",
    "ways_to_set",
    "workspace_file",
]

ENV_PREFIX: Final = "MPLP_LSP_"
USER_FILE: Final = Path("mplp-lsp") / "config.toml"
WORKSPACE_FILE: Final = ".mplp-lsp.toml"
PYPROJECT: Final = "pyproject.toml"
PYPROJECT_TABLE: Final = ("tool", "mplp-lsp")
_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})
# A dedicated flag's value that puts its setting back to the default (``--no-remote``).
RESET: Final = object()


# eq=False: nothing compares these (what `events` loads: docs/daemon.md).
@dataclass(slots=True, eq=False)
class Layer:
    """One source's values by attribute name; ``origins`` names where each came from."""

    origin: str
    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    # What the command line got wrong: the command stops (a source read from a file warns).
    errors: list[str] = field(default_factory=list)

    def origin_of(self, name: str) -> str:
        return self.origins.get(name, self.origin)


def user_file(env: Mapping[str, str] = os.environ) -> Path:
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / USER_FILE


def config_files(root: Path | None, env: Mapping[str, str] = os.environ) -> tuple[Path, ...]:
    """Every file a workspace's configuration is read from, present or not."""
    own = () if root is None else (root / WORKSPACE_FILE, root / PYPROJECT)
    return (user_file(env), *own)


def workspace_file(root: Path) -> tuple[Path, tuple[str, ...]] | None:
    """The workspace's settings file and the table in it, or None when it has none."""
    own = root / WORKSPACE_FILE
    if own.is_file():
        return own, ()
    pyproject = root / PYPROJECT
    if pyproject.is_file() and _has_table(pyproject):
        return pyproject, PYPROJECT_TABLE
    return None


def shadowed_pyproject(root: Path) -> Path | None:
    """The pyproject.toml whose table is ignored because ``.mplp-lsp.toml`` exists."""
    pyproject = root / PYPROJECT
    if (root / WORKSPACE_FILE).is_file() and pyproject.is_file() and _has_table(pyproject):
        return pyproject
    return None


def file_layer(path: Path, table: tuple[str, ...], kind: str) -> Layer:
    """The settings in ``path`` (under ``table``); a missing file gives an empty layer.

    Problems cost only their own key and are reported as ``FILE: KEY: REASON``."""
    where = f"{path}{''.join(f' [{part}]' for part in table[:1])}"
    layer = Layer(f"{kind} {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return layer
    except (OSError, UnicodeDecodeError) as error:
        layer.warnings.append(f"{path}: cannot be read ({_reason(error)}); ignored")
        return layer
    import tomllib  # at the first settings file: most commands find none to read

    try:
        document: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        layer.warnings.append(f"{path}: not valid TOML ({error}); ignored")
        return layer
    for part in table:
        document = document.get(part) if isinstance(document, dict) else None
    if document is None:
        return layer
    if not isinstance(document, dict):
        layer.warnings.append(f"{where}: must be a table of settings; ignored")
        return layer
    raw: dict[str, Any] = {}
    for key, value in document.items():
        name = setting_name(key)
        if name is None:
            layer.warnings.append(f"{path}: unknown setting {key!r} ignored")
        else:
            raw[name] = value
    layer.values, problems = checked(raw)
    layer.warnings.extend(f"{path}: {problem}; ignored" for problem in problems)
    return layer


def env_name(name: str) -> str:
    """``debounce_ms`` → ``MPLP_LSP_DEBOUNCE_MS``."""
    return ENV_PREFIX + name.upper()


def env_layer(env: Mapping[str, str]) -> Layer:
    layer = Layer("env")
    raw: dict[str, Any] = {}
    for name in SETTING_NAMES:
        variable = env_name(name)
        text = env.get(variable)
        if text is None or text == "":
            continue
        value, unreadable = text_value(name, text)
        if unreadable is not None:
            layer.warnings.append(f"{variable}: {unreadable}; ignored")
            continue
        raw[name] = value
        layer.origins[name] = f"env {variable}"
    layer.values, problems = checked(raw)
    layer.warnings.extend(f"{env_name(p.name)}: {p}; ignored" for p in problems)
    return layer


def text_value(name: str, text: str) -> tuple[Any, str | None]:
    """A setting's value from text (an environment variable, ``--set``), or a problem."""
    types = _types(name)
    if "string" in types:
        return text, None
    if types == {"boolean"}:
        word = text.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE, None
        return None, f"{wire_name(name)} wants true or false, not {text!r}"
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return None, f"{wire_name(name)} wants JSON here, and {text!r} is not"


def flag_layer(assignments: Sequence[str], dedicated: Mapping[str, tuple[str, Any]]) -> Layer:
    """The command line's layer: ``--set KEY=VALUE`` assignments, then the dedicated flags
    (attribute name → (flag, value); a None value is a flag not given, :data:`RESET` one that
    puts the setting back to its default). Every problem is an error of the layer."""
    layer = Layer("flag")
    raw: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        name = setting_name(key.strip())
        if not sep:
            layer.errors.append(f"--set {assignment}: not KEY=VALUE (KEY= resets KEY)")
            continue
        if name is None:
            layer.errors.append(f"--set {assignment}: {unknown_setting(key.strip())}")
            continue
        if text == "":
            raw[name] = _default(name)
            layer.origins[name] = f"flag --set {wire_name(name)}= (the default)"
            continue
        value, problem = text_value(name, text)
        if problem is not None:
            layer.errors.append(f"--set {assignment}: {problem}")
            continue
        raw[name] = value
        layer.origins[name] = f"flag --set {wire_name(name)}"
    for name, (flag, value) in dedicated.items():
        if value is RESET:
            raw[name] = _default(name)
            layer.origins[name] = f"flag {flag}"
        elif value is not None:
            raw[name] = value
            layer.origins[name] = f"flag {flag}"
    layer.values, problems = checked(raw)
    for p in problems:
        flag = layer.origin_of(p.name).removeprefix("flag ")
        layer.errors.append(f"{flag}: {p.described()}")
    return layer


def unknown_setting(key: str) -> str:
    """Says that ``key`` is no setting, and which one the user may have meant."""
    from difflib import get_close_matches

    close = get_close_matches(key.removeprefix("mplp."), sorted(_SCHEMA_TYPES), n=1)
    hint = f" (did you mean {close[0]}?)" if close else " (`mplp-lsp config` lists them)"
    return f"no setting is named {key!r}{hint}"


def _default(name: str) -> Any:
    """A setting's default as a JSON value, as the other values of a layer are."""
    return Settings().to_wire({name})[wire_name(name)]


def ways_to_set(wire: str, value: str) -> str:
    """Every place a user can set a setting from, whatever they run: an editor, ``watch``, a
    hook, a CI script. For messages that tell the user to set it."""
    name = setting_name(wire)
    assert name is not None
    return (
        f"set {wire} to {value}: `{wire} = {value}` in your user file ({user_file()}), "
        f"{env_name(name)}={value} in the environment, --set {wire}={value} on the command "
        f"line, or mplp.{wire} in your editor's user settings"
    )


def _types(name: str) -> set[str]:
    kind = _SCHEMA_TYPES.get(wire_name(name), [])
    return {kind} if isinstance(kind, str) else set(kind)


_SCHEMA_TYPES: Final[dict[str, Any]] = {
    key: spec.get("type", []) for key, spec in settings_schema()["properties"].items()
}


def _has_table(pyproject: Path) -> bool:
    import tomllib

    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    tool = document.get(PYPROJECT_TABLE[0])
    return isinstance(tool, dict) and PYPROJECT_TABLE[1] in tool


def _reason(error: Exception) -> str:
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)

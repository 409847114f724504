"""One resolved configuration per workspace, and where each value came from.

Sources, lowest first (each key from the highest source that sets it):

1. the defaults of :class:`~mplp_lsp.config.settings.Settings`;
2. the user's file (``$XDG_CONFIG_HOME/mplp-lsp/config.toml``);
3. the workspace's file (``.mplp-lsp.toml``, else ``[tool.mplp-lsp]`` in ``pyproject.toml``);
4. the editor's settings (for a CLI process: those the store's owner last recorded);
5. environment variables ``MPLP_LSP_<NAME>``;
6. command-line flags.

Workspace-level sources (the workspace's file, the editor's workspace and folder entries)
cannot set :data:`~mplp_lsp.config.settings.SENSITIVE_SETTINGS` unless the user's own sources (2,
the
editor's user-level entries, 5, 6) turned ``allowWorkspaceSensitiveSettings`` on, the highest
of them deciding; the switch itself never comes from a workspace-level source.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mplp_lsp.config.settings import (
    SETTING_NAMES,
    Settings,
    checked,
    editor_values,
    setting_name,
    wire_name,
    workspace_level_only,
)
from mplp_lsp.config.sources import (
    Layer,
    config_files,
    env_layer,
    file_layer,
    shadowed_pyproject,
    user_file,
    workspace_file,
)

__all__ = ["DEFAULT", "EDITOR", "RECORDED_EDITOR", "Resolved", "resolve"]

DEFAULT: Final = "default"
EDITOR: Final = "editor"
RECORDED_EDITOR: Final = "editor (as the store's owner last received it)"
_ALLOW_NAME: Final = "allow_workspace_sensitive_settings"


# eq=False: nothing compares these (what `events` loads: docs/daemon.md).
@dataclass(frozen=True, slots=True, eq=False)
class Resolved:
    """The effective settings of one workspace and the origin of each (by wire name)."""

    settings: Settings
    origins: Mapping[str, str]
    warnings: tuple[str, ...] = ()
    # The files this configuration reads (present or not): a daemon watches them.
    files: tuple[Path, ...] = ()
    # What the editor set (attribute names), so a file change can be re-resolved without it.
    editor: Mapping[str, Any] = field(default_factory=dict)

    def origin(self, name: str) -> str:
        """The origin of a setting given by wire or attribute name."""
        key = setting_name(name)
        return self.origins[wire_name(key)] if key is not None else DEFAULT


def resolve(
    root: Path | None,
    *,
    editor: Any = None,
    folder_uri: str | None = None,
    editor_origin: str = EDITOR,
    flags: Layer | None = None,
    env: Mapping[str, str] = os.environ,
) -> Resolved:
    """The configuration of the workspace at ``root`` (None: user-level sources only).

    ``editor`` is what the editor sent (any form :func:`~mplp_lsp.config.settings.parse_settings`
    accepts), ``flags`` the command line's layer. Never raises for bad input: each bad value
    costs its own key, with a warning naming its source, key and reason.
    """
    user = file_layer(user_file(env), (), "user file")
    warnings = list(user.warnings)
    workspace = Layer("workspace file")
    if root is not None:
        found = workspace_file(root)
        if found is not None:
            workspace = file_layer(*found, "workspace file")
            warnings += workspace.warnings
        if (shadowed := shadowed_pyproject(root)) is not None:
            warnings.append(f"{shadowed}: [tool.mplp-lsp] is ignored because .mplp-lsp.toml exists")
    from_env = env_layer(env)
    flags = flags or Layer("flag")
    warnings += from_env.warnings + flags.warnings
    machine = editor_values(editor, folder_uri=folder_uri)
    opt_in = _last_set(
        user.values.get(_ALLOW_NAME),
        machine.allows_workspace_sensitive,
        from_env.values.get(_ALLOW_NAME),
        flags.values.get(_ALLOW_NAME),
    )
    where = f"{workspace.origin.removeprefix('workspace file ')}: "
    workspace.values = workspace_level_only(workspace.values, opt_in, warnings, where)
    edited = editor_values(editor, folder_uri=folder_uri, allowed=opt_in)
    warnings += edited.warnings
    editor_layer = Layer(editor_origin)
    editor_layer.values, problems = checked(edited.values)
    warnings += [f"{editor_origin}: {problem}; ignored" for problem in problems]
    layers = (user, workspace, editor_layer, from_env, flags)
    values: dict[str, Any] = {}
    origins = {wire_name(name): DEFAULT for name in SETTING_NAMES}
    for layer in layers:
        for name, value in layer.values.items():
            values[name] = value
            origins[wire_name(name)] = layer.origin_of(name)
    return Resolved(
        Settings.checked(values),
        origins,
        tuple(warnings),
        config_files(root, env),
        dict(editor_layer.values),
    )


def _last_set(*choices: Any) -> bool:
    decided = False
    for choice in choices:
        if isinstance(choice, bool):
            decided = choice
    return decided

"""``mplp-lsp config``: the effective configuration of a workspace and where each value came
from, as ``git config --show-origin`` shows it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mplp_lsp.cli.common import (
    WORKSPACE_DEFAULT,
    add_state_options,
    add_workspace_option,
    configuration,
    find_workspace,
    reading,
)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "config",
        help="show the effective settings of a workspace and where each comes from",
        description=(
            "Print every setting with its value and origin: default, user file PATH, "
            "workspace file PATH, editor (as the store's owner last received it), env "
            "VARIABLE or flag. Sources, lowest first: defaults, the user file "
            "($XDG_CONFIG_HOME/mplp-lsp/config.toml), the workspace file (.mplp-lsp.toml, "
            "else [tool.mplp-lsp] in pyproject.toml), the editor, MPLP_LSP_* variables, "
            "flags. Problems with a source are reported on stderr (docs/settings.md)."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_workspace_option(parser, f"the workspace, or any directory inside it ({WORKSPACE_DEFAULT})")
    add_state_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    root = find_workspace(args)
    reading(args, "config", root)
    resolved = configuration(args, root)
    values = resolved.settings.to_wire()
    if args.json:
        report = {
            "workspace": str(root),
            "settings": {
                key: {"value": value, "origin": resolved.origins[key]}
                for key, value in values.items()
            },
            "files": [str(path) for path in resolved.files],
            "warnings": list(resolved.warnings),
        }
        print(json.dumps(report, ensure_ascii=False))
        return 0
    width = max(len(origin) for origin in resolved.origins.values())
    for key, value in values.items():
        shown = json.dumps(value, ensure_ascii=False)
        print(f"{resolved.origins[key]:<{width}}  {key}={shown}")
    return 0

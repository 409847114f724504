"""The configuration a process without an editor resolves (watch, hooks, emit, status, ...).

Such a process has no editor to ask, so it takes the editor's values as the store's owner
(an editor's ``serve``) last recorded them: a commit made from a terminal reports with the
``gitAuthorEmail`` the editor has now, without restarting anything. Only settings a workspace
may set are recorded (:data:`~mplp_lsp.config.settings.SENSITIVE_SETTINGS` never are): what runs a
program, reads a file or sends data comes to a CLI process from the user's file, the
environment or its flags.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from mplp_lsp.config.resolve import RECORDED_EDITOR, Resolved, resolve
from mplp_lsp.config.settings import SENSITIVE_SETTINGS, Settings, wire_name
from mplp_lsp.config.sources import Layer

__all__ = ["EDITOR_META_KEY", "editor_record", "recorded_editor", "resolve_for_process"]

EDITOR_META_KEY: Final = "config.editor"


def resolve_for_process(
    root: Path | None, flags: Layer | None = None, env: Mapping[str, str] = os.environ
) -> Resolved:
    resolved = resolve(root, flags=flags, env=env)
    if root is None:
        return resolved
    recorded = recorded_editor(_database(root, resolved.settings))
    if not recorded:
        return resolved
    return resolve(root, editor=recorded, editor_origin=RECORDED_EDITOR, flags=flags, env=env)


def editor_record(values: Mapping[str, Any]) -> str:
    """What a store's owner records of the editor's values (attribute names in)."""
    names = {name for name in values if wire_name(name) not in SENSITIVE_SETTINGS}
    settings = Settings.checked({name: values[name] for name in names})
    return json.dumps(settings.to_wire(names))


def recorded_editor(database: Path) -> dict[str, Any] | None:
    """The editor's values recorded in the store (wire names), or None."""
    if not database.is_file():
        return None
    from mplp_lsp.store.database import connect, meta_value

    try:
        conn = connect(database, read_only=True)
        try:
            text = meta_value(conn, EDITOR_META_KEY)
        finally:
            conn.close()
    except sqlite3.Error:
        return None  # a store being created, or an older one: no record
    if text is None:
        return None
    try:
        record = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    return {k: v for k, v in record.items() if k not in SENSITIVE_SETTINGS}


def _database(root: Path, settings: Settings) -> Path:
    from mplp_lsp.engine.statedir import DATABASE_NAME, default_state_dir

    base = Path(settings.state_dir).expanduser() if settings.state_dir else default_state_dir(root)
    return base.absolute() / DATABASE_NAME

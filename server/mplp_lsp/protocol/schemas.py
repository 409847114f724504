"""Where the project's schema files live, and loading them.

An installed wheel carries them as ``mplp_lsp/schemas``; a source checkout keeps them in
the top-level ``schemas/`` folder beside ``server/``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


@cache
def schema_root() -> Path:
    for candidate in (_PACKAGE_DIR / "schemas", _PACKAGE_DIR.parent.parent / "schemas"):
        if (candidate / "v2").is_dir():
            return candidate
    raise FileNotFoundError(
        "mplp-lsp schema files are missing: reinstall the package (pip install mplp-lsp)"
    )


def schema_path(relative: str) -> Path:
    return schema_root() / relative


def load_json(relative: str) -> dict[str, Any]:
    document = json.loads(schema_path(relative).read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"{relative} is not a JSON object")
    return document


def all_schema_documents() -> dict[str, dict[str, Any]]:
    """Every ``*.schema.json`` under ``v2/``, by its ``$id`` (for ``$ref`` resolution)."""
    documents: dict[str, dict[str, Any]] = {}
    for path in sorted(schema_root().glob("v2/**/*.schema.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        documents[document["$id"]] = document
    return documents

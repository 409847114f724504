"""The action execution layer (AEL); see :mod:`mplp_lsp.actions.executor`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mplp_lsp.actions.executor import (
    ActionError,
    ActionExecutionLayer,
    Executor,
    Handled,
    PendingEvent,
    reference_executor,
)
from mplp_lsp.actions.files import FileHandler
from mplp_lsp.actions.http import LlmConfig, LlmHandler, http_call
from mplp_lsp.actions.kinds import parse_action
from mplp_lsp.actions.tool import ToolHandler
from mplp_lsp.config.settings import Settings

__all__ = [
    "ActionError",
    "ActionExecutionLayer",
    "Executor",
    "Handled",
    "LlmConfig",
    "PendingEvent",
    "parse_action",
    "reference_executor",
    "workspace_executor",
]


async def _noop(action: Any) -> Handled:
    return Handled()


def workspace_executor(root: Path, settings: Settings | None = None) -> Executor:
    """The executor that really runs actions, confined to the workspace ``root``."""
    settings = settings or Settings()
    llm = LlmConfig(
        settings.llm_endpoint_url,
        settings.llm_model,
        Path(settings.llm_api_key_file).expanduser() if settings.llm_api_key_file else None,
    )
    return Executor(
        {
            "noop": _noop,
            "tool": ToolHandler(root),
            "file": FileHandler(root),
            "http": http_call,
            "llm": LlmHandler(llm),
        }
    )

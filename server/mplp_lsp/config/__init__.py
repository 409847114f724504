"""The configuration of a workspace: settings resolved from files, editor, environment, flags.

:mod:`mplp_lsp.config.settings` defines what a setting is (one frozen model, its values checked
against the JSON schema the VS Code manifest and docs/settings.md follow); this package says
where values come from
(:mod:`.sources`), which wins (:mod:`.resolve`) and how a running daemon takes changes
(:mod:`.live`).
"""

from mplp_lsp.config.resolve import Resolved, resolve

__all__ = ["Resolved", "resolve"]

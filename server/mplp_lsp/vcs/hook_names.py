"""The git hooks ``mplp-lsp hooks install`` writes (a module of its own: the CLI parser needs
the names without importing GitPython)."""

HOOK_NAMES = (
    "reference-transaction",
    "post-commit",
    "post-merge",
    "post-checkout",
    "post-rewrite",
    "pre-push",
)

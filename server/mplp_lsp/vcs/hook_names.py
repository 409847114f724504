"""The git hooks ``mplp-lsp hooks install`` writes (a module of its own: the CLI parser needs
the names without importing GitPython)."""

TRANSACTION_HOOK = "reference-transaction"
# For a git without reference-transaction (before 2.28): what each of these reports.
FALLBACK_HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite", "pre-push")
HOOK_NAMES = (TRANSACTION_HOOK, *FALLBACK_HOOKS)

"""mplp-lsp: an editor-side daemon for the MPLP v1.0 integration layer and runtime."""

# The one place the version is written; the build reads it from here (pyproject.toml).
__version__ = "0.1.0"

__all__ = ["__version__"]

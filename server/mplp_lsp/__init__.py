"""mplp-lsp: an editor-side daemon for the MPLP v1.0 integration layer and runtime."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mplp-lsp")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]

"""Names other programs give to files that only exist for a moment (see docs/daemon.md).

A watcher sees them appear and vanish around the real change (a save through a temp file and
a rename, a bytecode write, an editor's swap file). They are never file events: the real file
gets its own event when the rename lands on it, so the save is still recorded once.
"""

from __future__ import annotations

import re

_TEMP_NAME = re.compile(
    r"""
      .+\.pyc\.\d+                  # CPython writes x.pyc.<id> and renames it to x.pyc
    | \..+\.sw[a-p]                 # Vim's swap files (.x.swp, .x.swo, ... .x.swa)
    | \..+\.sw[x-z]
    | 4913                          # Vim's probe for a writable directory
    | .+~                           # backup files (Vim, Emacs, nano)
    | \.\#.+                        # Emacs's lock links
    | \#.+\#                        # Emacs's auto-save files
    | .+___jb_(?:tmp|old)___        # JetBrains IDEs' safe write
    | \.goutputstream-\w+           # GLib (gedit, GNOME apps) atomic replace
    """,
    re.VERBOSE | re.DOTALL,
)


def is_temp_name(name: str) -> bool:
    """Whether a file *name* (no directory) is one of the well-known temporary names."""
    return _TEMP_NAME.fullmatch(name) is not None

"""Runs the mplp-lsp bundled with the VS Code extension: ``python -I -S launch.py serve``.

``-I`` keeps the working directory, the user's site-packages and PYTHON* variables off
``sys.path``; ``-S`` keeps the interpreter's own site-packages (and the ``.pth`` files in them,
which run code) off it too. What is left is the standard library and ``libs/`` beside this
file, which packaging filled (tools/bundle_server.py). Nothing of the workspace is imported,
even when the interpreter is the workspace's own virtual environment.

This file may be started by any Python the user has, so it must parse on old ones and say
plainly when the interpreter cannot run the bundle (exit status 3).
"""

# Old Pythons must get as far as the version check: no pathlib, f-strings or new syntax.
# ruff: noqa: UP031, UP036, PTH100, PTH118, PTH120, PTH123

import json
import os
import sys

UNSUPPORTED = 3


def refuse(message):
    sys.stderr.write(message + "\n")
    sys.exit(UNSUPPORTED)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    version = "%d.%d" % sys.version_info[:2]
    if sys.version_info < (3, 11):
        refuse("mplp-lsp needs Python 3.11 or newer; %s is Python %s." % (sys.executable, version))
    with open(os.path.join(here, "bundle.json"), encoding="utf-8") as manifest:
        supported = json.load(manifest)["python"]
    if version not in supported:
        refuse(
            "the bundled mplp-lsp has compiled modules for Python %s only; %s is Python %s."
            % (", ".join(supported), sys.executable, version)
        )
    sys.path.insert(0, os.path.join(here, "libs"))
    import runpy

    runpy.run_module("mplp_lsp", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

"""A second local user, for the attacks one user of a shared machine makes on another.

Created with ``useradd`` only under ``CI=true`` (a CI machine is throwaway; a developer's is
not, so elsewhere the tests that need it are skipped, saying why). Its code runs with its
own uid and gid and no other groups (``setpriv``), with the system's Python and only the
standard library: nothing of the victim's (its venv lives under a home others cannot
enter) and nothing of this repository.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.required import unavailable

NAME = "mplp-attacker"
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class LocalUser:
    name: str
    uid: int
    gid: int
    home: Path

    @property
    def python(self) -> str:
        found = shutil.which("python3", path=_SYSTEM_PATH)
        if found is None:
            unavailable("no python3 in the system's folders for the second user")
        return found

    def command(self, *argv: str) -> list[str]:
        """``argv`` to run as this user."""
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--",
            *argv,
        ]

    def env(self) -> dict[str, str]:
        return {"PATH": _SYSTEM_PATH, "HOME": str(self.home), "LANG": "C.UTF-8"}

    def run(self, *argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*argv),
            env=self.env(),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **kwargs,
        )

    def popen(self, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*argv),
            env=self.env(),
            cwd=self.home,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def python_script(self, folder: Path, name: str, source: str) -> Path:
        """Write an attacker's script where this user can read it."""
        path = folder / name
        path.write_text(source)
        path.chmod(0o644)
        return path


def second_user() -> LocalUser:
    """The second local user, created if missing; the test is skipped outside CI."""
    if os.environ.get("CI") != "true":
        pytest.skip(
            "needs a second local user, which is created with useradd only under CI=true "
            "(run as root with CI=true to include it)"
        )
    if os.geteuid() != 0:
        unavailable("creating a second local user (useradd) needs root")
    if shutil.which("setpriv") is None or shutil.which("useradd") is None:
        unavailable("useradd and setpriv (util-linux) are needed for the second local user")
    try:
        entry = pwd.getpwnam(NAME)
    except KeyError:
        # Test workers in parallel may both create it: the loser's useradd fails, the user exists.
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/usr/sbin/nologin", NAME],
            check=False,
            capture_output=True,
        )
        entry = pwd.getpwnam(NAME)
    return LocalUser(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder in /tmp both users can enter (0755, the victim's): what a shared machine's
    users see of each other's files is then decided by each file's own mode."""
    folder = Path(tempfile.mkdtemp(prefix="mplp-hostile-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""Opening a repository for reading, with git running in a controlled environment.

Every git process started here (through GitPython) gets the same hardening: no pager, no
terminal prompt, no optional locks, and configuration injected through ``GIT_CONFIG_*`` that
switches off what a repository's own config could make git run: an fsmonitor hook, an
external diff driver. Log commands add ``--no-ext-diff --no-textconv`` as well.

Ownership is git's call: the repository is located by git's own discovery, which refuses a
repository owned by someone else unless ``safe.directory`` allows it. Opening reports that as
:class:`RepoRefused` with git's reason instead of reading the files anyway.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mplp_lsp.sanitize.redact import strip_url_credentials
from mplp_lsp.vcs.gitfile import find_git_dir

if TYPE_CHECKING:
    import git

# Config that must not come from the repository: (key, value) pairs given to every git call.
_FORCED_CONFIG = (
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("diff.external", ""),
    ("core.quotePath", "false"),
    ("log.showSignature", "false"),
)
ENVIRONMENT: dict[str, str] = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_ASKPASS": "true",
    "SSH_ASKPASS": "true",
    "GIT_CONFIG_COUNT": str(len(_FORCED_CONFIG)),
    **{f"GIT_CONFIG_KEY_{i}": key for i, (key, _) in enumerate(_FORCED_CONFIG)},
    **{f"GIT_CONFIG_VALUE_{i}": value for i, (_, value) in enumerate(_FORCED_CONFIG)},
}
# Variables that would point git at another repository than the one asked for; a hook
# inherits some of them from the git process that runs it.
LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


class RepoRefused(RuntimeError):
    """The folder is not a usable repository, or git refuses it (ownership, format)."""


@dataclass(frozen=True, slots=True)
class RepoInfo:
    worktree: Path
    git_dir: Path  # this worktree's private dir: HEAD, logs/HEAD
    common_dir: Path  # shared refs, packed-refs, branch reflogs
    shallow: bool


class GitRepo:
    """A repository opened for reading; ``run`` is the one way to start git for it.

    Opening asks git itself (``rev-parse``) in a plain process; the GitPython object is made
    at the first command, so an idle daemon does not carry GitPython.
    """

    def __init__(self, info: RepoInfo) -> None:
        self.info = info
        self._git: git.Repo | None = None

    @classmethod
    def open(cls, path: Path) -> GitRepo:
        """The repository containing ``path``; :class:`RepoRefused` if there is none usable."""
        if find_git_dir(path) is None:
            # No .git here or above: git's discovery would find nothing either.
            raise RepoRefused("not a git repository (nor any of the parent directories)")
        try:
            done = subprocess.run(
                ["git", "rev-parse", "--show-toplevel", "--absolute-git-dir",
                 "--git-common-dir", "--is-shallow-repository"],
                cwd=path,
                env=_environment(),
                capture_output=True,
                check=False,
            )  # fmt: skip
        except OSError as error:
            raise RepoRefused(f"git cannot be run: {error}") from None
        if done.returncode != 0:
            raise RepoRefused(_reason(done.stderr.decode("utf-8", "replace"), done.returncode))
        lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
        if len(lines) != 4:
            raise RepoRefused("no working tree (a bare repository is not watched)")
        toplevel, git_dir, common, shallow = lines
        common_dir = Path(common) if Path(common).is_absolute() else Path(toplevel) / common
        if (common_dir.resolve() / "reftable").is_dir():
            raise RepoRefused("the reftable ref format is not supported; use the files backend")
        return cls(
            RepoInfo(
                worktree=Path(toplevel).resolve(),
                git_dir=Path(git_dir).resolve(),
                common_dir=common_dir.resolve(),
                shallow=shallow.strip() == "true",
            )
        )

    @property
    def _repo(self) -> git.Repo:
        if self._git is None:
            import git

            self._git = git.Repo(str(self.info.worktree))
            self._git.git.update_environment(**ENVIRONMENT)
        return self._git

    def run(self, *args: str, **kwargs: Any) -> str:
        """``git <args>`` in the worktree with the controlled environment; stdout as text."""
        result: str = self._repo.git.execute(
            ["git", *args], with_extended_output=False, strip_newline_in_stdout=False, **kwargs
        )
        return result

    def run_fed(self, *args: str, stdin: str) -> str:
        """``git <args>`` reading ``stdin`` (``--stdin`` lists of object ids), same environment.

        Started directly rather than through GitPython, whose ``execute`` scrubs every argv
        word for passwords (a URL parse each) and cannot feed text: for ten thousand commits
        that scrubbing alone cost more than git. Fed ids also keep the command line short.
        """
        return self.run_fed_bytes(*args, stdin=stdin).decode("utf-8", errors="replace")

    def run_fed_bytes(self, *args: str, stdin: str) -> bytes:
        """:meth:`run_fed`, its output as git wrote it (``cat-file --batch`` counts bytes)."""
        done = subprocess.run(
            ["git", *args],
            cwd=self.info.worktree,
            env=_environment(),
            input=stdin.encode("utf-8"),
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            import git

            raise git.GitCommandError(["git", *args], done.returncode, done.stderr)
        return done.stdout

    def repo_url(self) -> str:
        """``origin``'s URL without credentials, else a stable identifier of this repository."""
        import git

        try:
            url = self._repo.git.config("--get", "remote.origin.url").strip()
        except git.GitCommandError:
            url = ""
        if url:
            return strip_url_credentials(url)
        digest = hashlib.sha256(os.fsencode(self.info.common_dir)).hexdigest()[:16]
        return f"local:{digest}"

    def close(self) -> None:
        if self._git is not None:
            self._git.close()


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARIABLES}
    return {**env, **ENVIRONMENT, "LC_ALL": "C", "LANGUAGE": "C"}


def _reason(stderr: str, status: int) -> str:
    text = " ".join(line.strip() for line in stderr.strip().splitlines() if line.strip())
    return text or f"git exited with status {status}"

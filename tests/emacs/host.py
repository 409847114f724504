"""A real terminal Emacs (Debian's emacs-nox with elpa-eglot or elpa-lsp-mode) in tmux.

The Emacs runs the configuration docs/editors/emacs.md gives for its client, read from that
page, plus a test prelude that only starts an Emacs server (``emacsclient --eval`` reads
buffers, diagnostics and the client's answers from outside) and silences the native compiler's
first-run warnings. Keys are typed through ``tmux send-keys`` and the screen is read with
``capture-pane``: opening, editing, saving, dired, code actions and quitting are what a user
does. The server is the ``mplp-lsp`` on the PATH: this test venv's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from tests.e2e.harness import server_env
from tests.required import unavailable
from tests.support.waiting import wait_until

Client = Literal["eglot", "lsp-mode"]
CLIENTS: tuple[Client, ...] = ("eglot", "lsp-mode")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "editors" / "emacs.md"
T = TypeVar("T")

# Before the site-start files: their first load compiles natively in the background and would
# fill *Warnings* with the compiler's notes, which are not the client's warnings under test.
EARLY_INIT = """\
(setq native-comp-async-report-warnings-errors 'silent
      native-comp-deferred-compilation nil
      inhibit-startup-screen t)
"""

PRELUDE = """\
;; --- the test's own part: an Emacs server for emacsclient, and helpers it evaluates ---
(require 'server)
(require 'json)
(setq server-socket-dir {sockets} server-name "mplp")
(server-start)

(defun mplp-test-buffer (file)
  (or (find-buffer-visiting file) (error "no buffer visits %s" file)))

(defun mplp-test-text (file)
  "FILE's buffer text, and whether it is modified."
  (with-current-buffer (mplp-test-buffer file)
    (vector (buffer-substring-no-properties (point-min) (point-max))
            (if (buffer-modified-p) t :json-false))))

(defun mplp-test-diagnostics (file)
  (with-current-buffer (mplp-test-buffer file)
    (vconcat (mapcar #'flymake-diagnostic-text (flymake-diagnostics)))))

(defvar mplp-test--answers (make-hash-table :test 'equal))
(defun mplp-test-answered (key answer) (puthash key (list answer) mplp-test--answers))
(defun mplp-test-answer (key)
  "A request's answer: [answer] once it came, else false (requests are asked
asynchronously: a synchronous one inside emacsclient's evaluation never returns)."
  (let ((answer (gethash key mplp-test--answers)))
    (if answer (progn (remhash key mplp-test--answers) (vector (car answer))) :json-false)))

(defun mplp-test-warnings ()
  (let ((buffer (get-buffer "*Warnings*")))
    (if buffer (with-current-buffer buffer (buffer-string)) :json-false)))
"""

CLIENT_PRELUDE: dict[Client, str] = {
    "eglot": """\
(defun mplp-test-connected (file)
  (with-current-buffer (mplp-test-buffer file)
    (let ((server (eglot-current-server)))
      (if (and server (jsonrpc-running-p server)) t :json-false))))

(defun mplp-test-ask (file method key)
  (with-current-buffer (mplp-test-buffer file)
    (jsonrpc-async-request (eglot-current-server) (intern (concat ":" method)) nil
                           :success-fn (lambda (answer) (mplp-test-answered key answer)))))
""",
    "lsp-mode": """\
(defun mplp-test--workspace (file)
  (with-current-buffer (mplp-test-buffer file)
    (seq-find (lambda (w) (eq (lsp--client-server-id (lsp--workspace-client w)) 'mplp-lsp))
              (lsp-workspaces))))

(defun mplp-test-connected (file)
  (let ((workspace (mplp-test--workspace file)))
    (if (and workspace (eq (lsp--workspace-status workspace) 'initialized)) t :json-false)))

(defun mplp-test-ask (file method key)
  (with-current-buffer (mplp-test-buffer file)
    (with-lsp-workspace (mplp-test--workspace file)
      (lsp-request-async method nil (lambda (answer) (mplp-test-answered key answer))))))
""",
}


def emacs_or_skip(client: Client) -> str:
    """Emacs with the client's package; without them the test skips (fails under CI)."""
    emacs = shutil.which("emacs")
    if emacs is None or shutil.which("tmux") is None or shutil.which("emacsclient") is None:
        unavailable("no terminal Emacs in tmux (apt-get install emacs-nox elpa-eglot "
                    "elpa-lsp-mode tmux)")  # fmt: skip
    probe = subprocess.run(
        [emacs, "--batch", "--eval", f"(require '{client})"],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": os.devnull},
        check=False,
        timeout=120,
    )
    if probe.returncode != 0:
        package = "elpa-eglot" if client == "eglot" else "elpa-lsp-mode"
        unavailable(f"Emacs has no {client} (apt-get install {package})")
    assert emacs is not None
    return emacs


def documented_config(client: Client) -> str:
    """The configuration docs/editors/emacs.md gives for ``client``."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(
        rf"<!-- tested: {re.escape(client)} -->\s*```emacs-lisp\n(.*?)```", text, re.DOTALL
    )
    assert found, f"docs/editors/emacs.md has no tested {client} configuration"
    return found.group(1)


def elisp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Emacs:
    """One terminal Emacs in its own tmux server, with its own HOME."""

    client: Client
    home: Path
    cwd: Path
    env: dict[str, str]
    socket: str  # tmux's
    log: list[str] = field(default_factory=list)

    # --- the terminal ---------------------------------------------------------------------

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        """Type: each argument is a tmux key name (``C-x``, ``Enter``) or literal text."""
        for key in keys:
            if re.fullmatch(
                r"(C-|M-|S-)+\S+|Enter|Escape|Tab|BSpace|Space|Up|Down|Left|Right", key
            ):
                self.tmux("send-keys", "-t", "emacs", key)
            else:
                self.tmux("send-keys", "-t", "emacs", "-l", key)
            time.sleep(0.05)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "emacs")

    def alive(self) -> bool:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "has-session", "-t", "emacs"],
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    # --- asking Emacs -----------------------------------------------------------------------

    def eval(self, expression: str) -> Any:
        """Evaluate an Emacs Lisp expression in the running Emacs; its value, through JSON."""
        out = self.home / "eval.json"
        wrapped = (
            f"(with-temp-file {elisp_string(str(out))} "
            f"(set-buffer-multibyte t) (insert (json-encode {expression})))"
        )
        done = subprocess.run(
            ["emacsclient", "-s", str(self.home / "sockets" / "mplp"), "--eval", wrapped],
            capture_output=True,
            text=True,
            check=False,
            env=self.env,
            timeout=60,
        )
        if done.returncode != 0:
            raise EmacsError(f"{expression}: {done.stderr.strip() or done.stdout.strip()}")
        return json.loads(out.read_text(encoding="utf-8"))

    def wait(self, what: str, probe: Callable[[], T | None], timeout: float = 60.0) -> T:
        """Poll ``probe`` until it returns something true (an Emacs error counts as not yet);
        its value. A timeout says what Emacs showed."""
        errors: list[EmacsError] = []

        def attempt() -> T | None:
            try:
                return probe()
            except EmacsError as error:
                errors[:] = [error]
                return None

        def described() -> str:
            screen = self.screen() if self.alive() else "(Emacs has exited)"
            error = f" (last error: {errors[0]})" if errors else ""
            return f"{what} in {self.client}{error}\n--- screen ---\n{screen}"

        return wait_until(attempt, timeout=timeout, what=described)

    # --- what a user does -----------------------------------------------------------------

    def open(self, path: Path) -> None:
        """C-x C-f PATH RET, and wait until the client has connected the buffer."""
        self.keys("C-x", "C-f")
        self.wait("the find-file prompt", lambda: "Find file:" in self.screen())
        self.keys("C-a", "C-k", str(path), "Enter")
        self.wait(f"{path.name} connected", lambda: self.connected(path))

    def connected(self, path: Path) -> bool:
        return self.eval(f"(mplp-test-connected {elisp_string(str(path))})") is True

    def request(self, path: Path, method: str, timeout: float = 30.0) -> Any:
        """Ask the server a request without parameters, through the client of ``path``'s
        buffer; its answer."""
        key = f"{method}-{time.monotonic_ns()}"
        self.eval(f"(mplp-test-ask {elisp_string(str(path))} {elisp_string(method)} "
                  f"{elisp_string(key)})")  # fmt: skip
        [answer] = self.wait(
            f"the answer to {method}",
            lambda: self.eval(f"(mplp-test-answer {elisp_string(key)})"),
            timeout,
        )
        return answer

    def status(self, path: Path) -> dict[str, Any]:
        """The server's ``mplp/status``."""
        answer = self.request(path, "mplp/status")
        assert isinstance(answer, dict)
        return answer

    def ready(self, path: Path, role: str = "owner") -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            status = self.status(path)
            folders = status.get("workspaces") or []
            if status.get("ready") and folders and folders[0].get("role") == role:
                return status
            return None

        return self.wait(f"the server of {path.name} ready as {role}", probe)

    def type_and_save(self, text: str) -> None:
        """Type ``text`` at the end of the current buffer, then C-x C-s."""
        self.keys("M->", text, "C-x", "C-s")

    def save(self) -> None:
        self.keys("C-x", "C-s")

    def buffer(self, path: Path) -> tuple[str, bool]:
        text, modified = self.eval(f"(mplp-test-text {elisp_string(str(path))})")
        return text, modified

    def diagnostics(self, path: Path) -> list[str]:
        return list(self.eval(f"(mplp-test-diagnostics {elisp_string(str(path))})"))

    def warnings(self) -> str | None:
        found = self.eval("(mplp-test-warnings)")
        return found if isinstance(found, str) else None

    def command(self, name: str, *answers: str) -> None:
        """M-x NAME RET, then each answer typed at its prompt and confirmed."""
        self.keys("M-x")
        self.wait("the M-x prompt", lambda: "M-x" in self.screen())
        self.keys(name, "Enter")
        for answer in answers:
            time.sleep(0.5)
            self.answer(answer)

    def answer(self, text: str) -> None:
        """Type ``text`` into the minibuffer and confirm it; a space is typed as C-q SPC (in a
        completing prompt SPC would complete a word)."""
        for index, word in enumerate(text.split(" ")):
            if index:
                self.keys("C-q", "Space")
            if word:
                self.keys(word)
        self.keys("Enter")

    def quit(self, timeout: float = 30.0) -> None:
        """C-x C-c, answering "yes" to the questions Emacs asks about its processes."""
        self.keys("C-x", "C-c")
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            try:
                screen = self.screen()
            except subprocess.CalledProcessError:
                break  # the terminal closed meanwhile
            if "(yes or no)" in screen:
                self.keys("yes", "Enter")
            elif re.search(r"\(y or n\)|\[y/n\]|\(y, n", screen):
                self.keys("y")
            time.sleep(0.2)
        assert not self.alive(), f"{self.client}: Emacs did not quit\n{self.screen()}"


class EmacsError(RuntimeError):
    """emacsclient could not evaluate an expression."""


@contextmanager
def running_emacs(
    client: Client,
    base: Path,
    *,
    cwd: Path,
    name: str = "emacs",
    env: Mapping[str, str] | None = None,
    files: tuple[Path, ...] = (),
) -> Iterator[Emacs]:
    """A terminal Emacs of its own (HOME, tmux server, Emacs server) for the ``with`` body;
    killed afterwards if the body did not quit it."""
    emacs = emacs_or_skip(client)
    home = base / f"{name}-home"
    (home / ".emacs.d").mkdir(parents=True)
    sockets = home / "sockets"
    sockets.mkdir(mode=0o700)
    (home / ".emacs.d" / "early-init.el").write_text(EARLY_INIT)
    prelude = home / "mplp-test.el"
    prelude.write_text(
        ";; -*- lexical-binding: t -*-\n"
        + PRELUDE.format(sockets=elisp_string(str(sockets)))
        + CLIENT_PRELUDE[client]
    )
    (home / ".emacs.d" / "init.el").write_text(
        documented_config(client) + f"\n(load {elisp_string(str(prelude))} nil t t)\n"
    )
    venv_bin = str(Path(sys.executable).parent)
    process_env = server_env(
        {
            "HOME": str(home),
            "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "TERM": "xterm-256color",
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_RUNTIME_DIR": str(sockets),
            **(env or {}),
        }
    )
    session = Emacs(client, home, cwd, process_env, f"mplp-{os.getpid()}-{name}-{time.time_ns()}")
    command = " ".join(shlex.quote(part) for part in [emacs, "-nw", *map(str, files)])
    exports = [f"{key}={value}" for key, value in process_env.items()]
    session.tmux(
        "-f", os.devnull, "new-session", "-d", "-s", "emacs", "-x", "160", "-y", "48",
        "-c", str(cwd), "env", "-i", *exports, "sh", "-c", command,
    )  # fmt: skip
    try:
        session.wait("the Emacs server", lambda: (sockets / "mplp").exists(), timeout=60)
        # emacsclient is answered from the command loop: Emacs has started and reads keys
        session.wait("Emacs reading keys", lambda: session.eval("t") is True)
        yield session
    finally:
        if session.alive():
            subprocess.run(["tmux", "-L", session.socket, "kill-server"], check=False)
